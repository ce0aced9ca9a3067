import { Headers, type Logger, type MessageEnvelope } from "@factflow/protocols";
import * as v from "valibot";
import { describe, expect, it } from "vitest";
import {
  brokerUrl,
  deadLetterFromHeaders,
  destinationMemo,
  KnownDestinations,
  networkErrorCode,
  positiveInt,
  providerLogger,
} from "../src/index.js";

describe("networkErrorCode", () => {
  it("reads a network code from the error, or from its text when given", () => {
    expect(networkErrorCode(Object.assign(new Error("x"), { code: "ECONNREFUSED" }))).toBe("ECONNREFUSED");
    expect(networkErrorCode(Object.assign(new Error("x"), { code: "EACCES" }))).toBeUndefined();
    expect(networkErrorCode(new Error("connect ETIMEDOUT"))).toBeUndefined();
    expect(networkErrorCode(new Error("connect ETIMEDOUT"), "connect ETIMEDOUT")).toBe("ETIMEDOUT");
    expect(networkErrorCode(undefined)).toBeUndefined();
    expect(networkErrorCode(null, "EPERM then ECONNRESET")).toBeUndefined();
  });
});

describe("deadLetterFromHeaders", () => {
  const message: MessageEnvelope = {
    id: "m1",
    body: {},
    headers: {},
    correlationId: "m1",
    publishedAt: "2026-01-01T00:00:00.000Z",
  };
  it("reads the failure headers", () => {
    const letter = deadLetterFromHeaders(
      message,
      {
        [Headers.deadLetterReason]: "exhausted",
        [Headers.deliveryAttempt]: "3",
        [Headers.deadLetteredAt]: "2026-01-02T00:00:00.000Z",
        [Headers.lastError]: "boom",
      },
      { reason: "unknown", deadLetteredAt: message.publishedAt },
    );
    expect(letter).toEqual({
      message,
      reason: "exhausted",
      attempts: 3,
      deadLetteredAt: "2026-01-02T00:00:00.000Z",
      lastError: "boom",
    });
  });
  it("falls back where the headers say nothing, with no lastError key", () => {
    const letter = deadLetterFromHeaders(
      message,
      { [Headers.deliveryAttempt]: "0" },
      { reason: "rejected", deadLetteredAt: "then" },
    );
    expect(letter).toEqual({ message, reason: "rejected", attempts: 1, deadLetteredAt: "then" });
    expect("lastError" in letter).toBe(false);
  });
});

describe("config fields", () => {
  it("positiveInt takes whole numbers from 1 to max", () => {
    expect(v.safeParse(positiveInt(10), 10).success).toBe(true);
    expect(v.safeParse(positiveInt(10), 0).success).toBe(false);
    expect(v.safeParse(positiveInt(10), 11).success).toBe(false);
    expect(v.safeParse(positiveInt(10), 1.5).success).toBe(false);
  });
  it("brokerUrl takes the named protocols, and a host when asked", () => {
    const amqp = brokerUrl(["amqp:", "amqps:"], "an amqp URL");
    expect(v.safeParse(amqp, "amqps://h:5671").success).toBe(true);
    const refused = v.safeParse(amqp, "http://h");
    expect(refused.issues?.[0]?.message).toBe("an amqp URL");
    expect(v.safeParse(amqp, "not a url").success).toBe(false);
    const stomp = brokerUrl(["stomp:"], "a stomp URL", { needsHost: true });
    expect(v.safeParse(stomp, "stomp://h:61613").success).toBe(true);
    expect(v.safeParse(stomp, "stomp:nohost").success).toBe(false);
  });
});

describe("destinationMemo", () => {
  it("resolves each destination once and starts over at the limit", () => {
    let calls = 0;
    const memo = destinationMemo((d) => {
      calls += 1;
      return d.toUpperCase();
    }, 2);
    expect(memo("a")).toBe("A");
    expect(memo("a")).toBe("A");
    expect(calls).toBe(1);
    memo("b");
    memo("c"); // the memo held 2: it starts over
    memo("a");
    expect(calls).toBe(4);
  });
});

describe("KnownDestinations", () => {
  it("lists queues, topics with their subscriptions, and forgets the oldest beyond the limit", () => {
    const known = new KnownDestinations(2);
    known.remember("/queue/a", "queue");
    known.remember("/topic/t", "topic", "s1");
    known.remember("/topic/t", "topic", "s2");
    known.remember("/queue/a", "queue", "ignored");
    expect(known.list()).toEqual([
      { destination: "/queue/a", kind: "queue" },
      { destination: "/topic/t", kind: "topic", subscriptions: ["s1", "s2"] },
    ]);
    known.remember("/queue/b", "queue");
    expect(known.list().map((d) => d.destination)).toEqual(["/topic/t", "/queue/b"]);
  });
});

describe("providerLogger", () => {
  it("names the provider on the caller's logger, and is silent without one", () => {
    const fields: Record<string, unknown>[] = [];
    const logger: Logger = {
      debug: () => {},
      info: () => {},
      warn: () => {},
      error: () => {},
      child: (f) => {
        fields.push(f);
        return logger;
      },
    };
    expect(providerLogger("rabbitmq", logger)).toBe(logger);
    expect(fields).toEqual([{ provider: "rabbitmq" }]);
    expect(() => providerLogger("redis", undefined).warn("nothing to see")).not.toThrow();
  });
});
