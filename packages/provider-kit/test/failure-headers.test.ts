import { Headers } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  deadLetterHeaders,
  emptyDurabilityCounters,
  MAX_LAST_ERROR_LENGTH,
  redriveHeaders,
  retryHeaders,
} from "../src/index.js";

const delivered = Object.freeze({
  [Headers.messageId]: "m-1",
  [Headers.correlationId]: "c-1",
  [Headers.deliveryAttempt]: "2",
  "x-user": "u",
});

describe("failure headers", () => {
  it("a retry copy carries the next attempt and the last error, cut at MAX_LAST_ERROR_LENGTH", () => {
    const headers = retryHeaders(delivered, 3, "x".repeat(5_000));
    expect(headers[Headers.deliveryAttempt]).toBe("3");
    expect(headers[Headers.lastError]).toBe("x".repeat(MAX_LAST_ERROR_LENGTH));
    expect(MAX_LAST_ERROR_LENGTH).toBe(1_000);
    expect(headers["x-user"]).toBe("u");
    expect(delivered[Headers.deliveryAttempt], "the input is not changed").toBe("2");
    expect(retryHeaders(delivered, 3)[Headers.lastError]).toBeUndefined();
  });

  it("a dead letter says why, where from, when, and keeps its attempt", () => {
    const at = new Date(Date.UTC(2026, 10, 30, 3, 41, 7, 512));
    const queue = deadLetterHeaders(delivered, "exhausted", { destination: "/queue/a" }, "boom", at);
    expect(queue).toMatchObject({
      [Headers.deadLetterReason]: "exhausted",
      [Headers.originalDestination]: "/queue/a",
      [Headers.deadLetteredAt]: "2026-11-30T03:41:07.512Z",
      [Headers.lastError]: "boom",
      [Headers.deliveryAttempt]: "2",
      "x-user": "u",
    });
    expect(queue[Headers.originalSubscription]).toBeUndefined();
    const topic = deadLetterHeaders(delivered, "topic-failure", {
      destination: "/topic/t",
      subscription: "s",
    });
    expect(topic[Headers.originalSubscription]).toBe("s");
    expect(topic[Headers.lastError]).toBeUndefined();
    expect(
      deadLetterHeaders(delivered, "rejected", { destination: "/queue/a" }, "y".repeat(1_500))[
        Headers.lastError
      ],
    ).toHaveLength(MAX_LAST_ERROR_LENGTH);
  });

  it("a redrive removes the failure bookkeeping and starts the budget over", () => {
    const dead = deadLetterHeaders(
      retryHeaders(delivered, 3, "boom"),
      "exhausted",
      { destination: "/topic/t", subscription: "s" },
      "boom",
    );
    expect(redriveHeaders(dead)).toEqual({
      [Headers.messageId]: "m-1",
      [Headers.correlationId]: "c-1",
      [Headers.deliveryAttempt]: "1",
      "x-user": "u",
    });
  });

  it("durability counters start at 0, one fresh object per call", () => {
    const a = emptyDurabilityCounters();
    expect(Object.values(a).every((n) => n === 0)).toBe(true);
    expect(Object.keys(a)).toHaveLength(8);
    a.published = 1;
    expect(emptyDurabilityCounters().published).toBe(0);
  });
});
