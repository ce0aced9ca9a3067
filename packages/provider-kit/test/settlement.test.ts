import { getEventListeners } from "node:events";
import { type Delivery, HandlerTimeoutError, resolveRetryPolicy } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { decideSettlement, type HandlerOutcome, HandlerRun, runHandler, SignalPool } from "../src/index.js";

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

  it("waits for a returned result's settleAfter, which a timeout or stop meanwhile does not cut short", async () => {
    let commit: () => void = () => {};
    const settleAfter = new Promise<void>((resolve) => {
      commit = resolve;
    });
    const result = { status: "ACKNOWLEDGED", settleAfter } as const;
    let handed = false;
    const controller = new AbortController();
    const outcome = runHandler(
      () => {
        handed = true;
        return result as never;
      },
      delivery,
      controller,
    );
    expect(handed).toBe(true);
    // Let the returned result reach runHandler, then run past the timeout while the commit waits.
    await Promise.resolve();
    await Promise.resolve();
    controller.abort(new HandlerTimeoutError(250));
    let settled: HandlerOutcome | undefined;
    void outcome.then((o) => {
      settled = o;
    });
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(settled).toBeUndefined();
    commit();
    expect(await outcome).toEqual(returned(result));
    // `onReturned` frees the caller's slot when the wait starts, and only then.
    let freed = 0;
    const waiting = runHandler(
      () => ({ status: "ACKNOWLEDGED", settleAfter: new Promise<void>(() => {}) }) as never,
      delivery,
      new AbortController(),
      () => freed++,
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(freed).toBe(1);
    void waiting;
    await runHandler(
      () => "ACKNOWLEDGED",
      delivery,
      new AbortController(),
      () => freed++,
    );
    expect(freed).toBe(1);
    // A rejected settleAfter still settles the delivery with the handler's result.
    const failed = {
      status: "ACKNOWLEDGED",
      settleAfter: Promise.reject(new Error("commit failed")),
    } as const;
    expect(await runHandler(() => failed as never, delivery, new AbortController())).toEqual(
      returned(failed),
    );
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

  it("with a HandlerRun: settles at once on run.abort and leaves no abort listener on the signal", async () => {
    const never = () => new Promise<never>(() => {});
    const run = new HandlerRun(60_000);
    const outcome = runHandler(never, delivery, run);
    expect(getEventListeners(run.controller.signal, "abort")).toHaveLength(0);
    run.abort(new Error("subscription closed"));
    expect(await outcome).toEqual({ kind: "stopped" });

    const timed = new HandlerRun(250);
    const timedOut = runHandler(never, delivery, timed);
    timed.expire();
    expect(await timedOut).toEqual({ kind: "timed-out", timeoutMs: 250 });

    // A run aborted before the handler starts settles without calling it.
    const early = new HandlerRun(60_000);
    early.abort(new Error("subscription closed"));
    let called = false;
    const skipped = await runHandler(
      () => {
        called = true;
        return "ACKNOWLEDGED";
      },
      delivery,
      early,
    );
    expect(skipped).toEqual({ kind: "stopped" });
    expect(called).toBe(false);
  });

  it("with a pooled HandlerRun: a settled, never-aborted controller serves the next delivery", async () => {
    const pool = new SignalPool(true, 4);
    const first = new HandlerRun(60_000, pool);
    expect(await runHandler(() => "ACKNOWLEDGED", delivery, first)).toEqual(returned("ACKNOWLEDGED"));
    first.release();
    const second = new HandlerRun(60_000, pool);
    expect(second.controller).toBe(first.controller);

    // Aborted (a stop): never handed out again, and an abort after release reaches nothing.
    const stopped = runHandler(() => new Promise<never>(() => {}), delivery, second);
    second.abort(new Error("subscription closed"));
    expect(await stopped).toEqual({ kind: "stopped" });
    second.release();
    const third = new HandlerRun(60_000, pool);
    expect(third.controller).not.toBe(second.controller);
    expect(third.controller.signal.aborted).toBe(false);

    // A handler that left a listener on its signal keeps its controller out of the pool.
    await runHandler(
      (_d, signal) => {
        signal.addEventListener("abort", () => {});
        return "ACKNOWLEDGED";
      },
      delivery,
      third,
    );
    third.release();
    expect(new HandlerRun(60_000, pool).controller).not.toBe(third.controller);
  });
});
