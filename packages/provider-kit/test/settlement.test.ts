import { type Delivery, HandlerTimeoutError, resolveRetryPolicy } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { decideSettlement, type HandlerOutcome, runHandler } from "../src/index.js";

const policy = resolveRetryPolicy({ maxAttempts: 3, initialDelayMs: 100, multiplier: 2 });
const ctx = (attempt: number, isTopic = false) => ({ attempt, policy, isTopic });
const returned = (result: unknown): HandlerOutcome => ({ kind: "returned", result: result as never });

describe("decideSettlement", () => {
  it("acks, rejects, retries with backoff and exhausts by status, attempt and destination kind", () => {
    expect(decideSettlement(returned("ACKNOWLEDGED"), ctx(1))).toEqual({ kind: "ack" });
    expect(decideSettlement(returned({ status: "REJECTED", reason: "bad" }), ctx(1))).toEqual({
      kind: "dead",
      reason: "rejected",
      lastError: "bad",
    });
    expect(decideSettlement(returned("FAILED"), ctx(2))).toEqual({
      kind: "retry",
      nextAttempt: 3,
      delayMs: 200,
      lastError: "handler returned FAILED",
      incomplete: false,
    });
    expect(decideSettlement(returned("FAILED"), ctx(3))).toMatchObject({ kind: "dead", reason: "exhausted" });
    expect(decideSettlement(returned("FAILED"), ctx(1, true))).toMatchObject({
      kind: "dead",
      reason: "topic-failure",
    });
  });

  it("counts throws, timeouts, internal statuses and garbage as attempts, then dead-letters them as incomplete", () => {
    const incompletes: HandlerOutcome[] = [
      ...["PENDING", "DELIVERED", "EXPIRED", 42, undefined, { status: "nope" }].map(returned),
      { kind: "threw", error: new TypeError("x is undefined") },
      { kind: "timed-out", timeoutMs: 300 },
    ];
    for (const outcome of incompletes) {
      expect(decideSettlement(outcome, ctx(1))).toMatchObject({
        kind: "retry",
        nextAttempt: 2,
        delayMs: 100,
        incomplete: true,
      });
      expect(decideSettlement(outcome, ctx(3))).toMatchObject({ kind: "dead", reason: "incomplete" });
    }
    expect(decideSettlement({ kind: "threw", error: new TypeError("x is undefined") }, ctx(1))).toMatchObject(
      {
        lastError: "handler threw TypeError: x is undefined",
      },
    );
    expect(decideSettlement({ kind: "timed-out", timeoutMs: 300 }, ctx(3))).toMatchObject({
      lastError: "handler timed out after 300 ms",
    });
  });

  it("hands a stopped delivery back without consuming an attempt", () => {
    expect(decideSettlement({ kind: "stopped" }, ctx(3))).toEqual({ kind: "hand-back" });
  });
});

describe("runHandler", () => {
  const delivery = { message: { id: "m", body: {} }, attempt: 1 } as unknown as Delivery;

  it("resolves with what the handler returned or threw", async () => {
    expect(await runHandler(() => "ACKNOWLEDGED", delivery, new AbortController())).toEqual(
      returned("ACKNOWLEDGED"),
    );
    const threw = await runHandler(
      () => {
        throw new Error("sync");
      },
      delivery,
      new AbortController(),
    );
    expect(threw).toMatchObject({ kind: "threw" });
    expect(
      await runHandler(async () => Promise.reject(new Error("async")), delivery, new AbortController()),
    ).toMatchObject({
      kind: "threw",
    });
  });

  it("settles at the timeout even when the handler never returns, and on a stop", async () => {
    const never = () => new Promise<never>(() => {});
    const timeout = new AbortController();
    const timedOut = runHandler(never, delivery, timeout);
    timeout.abort(new HandlerTimeoutError(250));
    expect(await timedOut).toEqual({ kind: "timed-out", timeoutMs: 250 });
    const stop = new AbortController();
    const stopped = runHandler(never, delivery, stop);
    stop.abort(new Error("subscription closed"));
    expect(await stopped).toEqual({ kind: "stopped" });
  });
});
