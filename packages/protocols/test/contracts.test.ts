import * as v from "valibot";
import { describe, expect, expectTypeOf, it } from "vitest";
import {
  type AdapterResult,
  DEFAULT_HANDLER_TIMEOUT_MS,
  type Delivery,
  type HandlerResult,
  isSettlingStatus,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
  type MessageHandler,
  MessageStatus,
  PipelineConfigSchema,
  type QueueProtocol,
  RETRY_POLICY_LIMITS,
  unwrapHandlerResult,
} from "../src/index.js";
import type { SettlingStatus } from "../src/message-status.js";

describe("MessageStatus", () => {
  it("only the three handler outcomes settle", () => {
    expect(Object.values(MessageStatus).filter(isSettlingStatus)).toEqual([
      "ACKNOWLEDGED",
      "FAILED",
      "REJECTED",
    ]);
    expectTypeOf<SettlingStatus>().toEqualTypeOf<"ACKNOWLEDGED" | "FAILED" | "REJECTED">();
  });

  it("a handler may return a bare status or one with a reason", () => {
    expect(unwrapHandlerResult("FAILED")).toEqual({ status: "FAILED" });
    expect(unwrapHandlerResult({ status: "REJECTED", reason: "bad input" })).toEqual({
      status: "REJECTED",
      reason: "bad input",
    });
    expectTypeOf<MessageHandler>().returns.toEqualTypeOf<Promise<HandlerResult> | HandlerResult>();
    expectTypeOf<MessageHandler>().parameters.toEqualTypeOf<[Delivery, AbortSignal]>();
  });
});

describe("QueueProtocol", () => {
  it("has no manual ack or nack", () => {
    expectTypeOf<keyof QueueProtocol>().toEqualTypeOf<
      | "name"
      | "capabilities"
      | "admin"
      | "connect"
      | "close"
      | "publish"
      | "subscribe"
      | "counters"
      | "health"
      | "claimFromNode"
    >();
  });
});

describe("AdapterResult", () => {
  it("data may be null to end the chain", () => {
    expectTypeOf<AdapterResult["data"]>().toExtend<null | string | number | boolean | object>();
    const end: AdapterResult = { data: null };
    expect(end.data).toBeNull();
  });
});

describe("PipelineConfigSchema", () => {
  const minimal = {
    name: "demo",
    init: { route: "a" },
    routes: { a: { inbound: { queue: "a.in" }, adapters: [{ type: "passthrough" }] } },
  };

  it("applies the documented defaults", () => {
    const parsed = v.parse(PipelineConfigSchema, minimal);
    expect(parsed.settings).toEqual({
      max_handlers: 30,
      max_fanout_pending: 500,
      retry: { max_attempts: 3, initial_delay_ms: 1000, multiplier: 2, max_delay_ms: 60_000 },
      handler_timeout_ms: 1_800_000,
    });
    expect(parsed.routes.a?.inbound).toEqual({
      queue: "a.in",
      concurrency: 1,
      prefetch: 10,
      ordering: "none",
      dead_letter: true,
    });
    expect(parsed.routes.a?.outbound).toEqual([]);
  });

  it("bounds what a pipeline may ask of a subscription by the same limits the providers enforce", () => {
    const settings = (extra: object) =>
      v.safeParse(PipelineConfigSchema, { ...minimal, settings: extra }).success;
    expect(settings({ handler_timeout_ms: MAX_HANDLER_TIMEOUT_MS })).toBe(true);
    expect(settings({ handler_timeout_ms: MAX_HANDLER_TIMEOUT_MS + 1 })).toBe(false);
    expect(settings({ retry: { max_attempts: RETRY_POLICY_LIMITS.maxAttempts.max + 1 } })).toBe(false);
    expect(settings({ retry: { multiplier: RETRY_POLICY_LIMITS.multiplier.max } })).toBe(true);
    const prefetch = (n: number) =>
      v.safeParse(PipelineConfigSchema, {
        ...minimal,
        routes: { a: { inbound: { queue: "a.in", prefetch: n }, adapters: [{ type: "passthrough" }] } },
      }).success;
    expect(prefetch(MAX_PREFETCH)).toBe(true);
    expect(prefetch(MAX_PREFETCH + 1)).toBe(false);
    expect(DEFAULT_HANDLER_TIMEOUT_MS).toBe(1_800_000);
  });

  it("reports every problem with its path", () => {
    const result = v.safeParse(PipelineConfigSchema, {
      name: "bad name",
      init: { route: "a" },
      routes: { a: { inbound: { queue: "a.in", concurrency: -1 }, adapters: [] } },
      extra: true,
    });
    expect(result.success).toBe(false);
    const paths = (result.issues ?? []).map((i) => v.getDotPath(i));
    expect(paths).toEqual(
      expect.arrayContaining(["name", "routes.a.inbound.concurrency", "routes.a.adapters", "extra"]),
    );
  });
});
