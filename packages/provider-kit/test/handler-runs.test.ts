import { getEventListeners } from "node:events";
import type { Delivery } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { HandlerRuns } from "../src/index.js";

const delivery = { message: { id: "m", body: {} }, attempt: 1 } as unknown as Delivery;
const never = () => new Promise<never>(() => {});

describe("HandlerRuns", () => {
  it("times a handler out, stops the running ones on abortAll, and reuses only a clean settled signal", async () => {
    const runs = new HandlerRuns({ timeoutMs: 30, releasesSignal: true, concurrency: 4 });
    const seen: AbortSignal[] = [];
    const timedOut = await runs.run((_d, signal) => {
      seen.push(signal);
      return never();
    }, delivery);
    expect(timedOut).toEqual({ kind: "timed-out", timeoutMs: 30 });

    const ok = await runs.run((_d, signal) => {
      seen.push(signal);
      return "ACKNOWLEDGED";
    }, delivery);
    expect(ok).toEqual({ kind: "returned", result: "ACKNOWLEDGED" });
    // The timed-out signal is never handed out again; the clean one serves the next delivery.
    expect(seen[1]).not.toBe(seen[0]);
    const stopped = runs.run((_d, signal) => {
      seen.push(signal);
      return never();
    }, delivery);
    runs.abortAll(new Error("subscription closed"));
    expect(await stopped).toEqual({ kind: "stopped" });
    expect(seen[2]).toBe(seen[1]);
    expect(seen[2]?.aborted).toBe(true);
  });

  it("stops a run when stopWhen aborts, also when it already has, and leaves no listener on it", async () => {
    const runs = new HandlerRuns({ timeoutMs: 60_000, releasesSignal: false, concurrency: 1 });
    const provider = new AbortController();
    const running = runs.run(never, delivery, provider.signal);
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(1);
    provider.abort(new Error("unsubscribed"));
    expect(await running).toEqual({ kind: "stopped" });
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    let called = false;
    const late = await runs.run(
      () => {
        called = true;
        return "ACKNOWLEDGED";
      },
      delivery,
      provider.signal,
    );
    expect(late).toEqual({ kind: "stopped" });
    expect(called).toBe(false);
  });
});

describe("HandlerRuns.drain", () => {
  it("after abortAll, waits only for runs whose handler returned and awaits its settleAfter", async () => {
    const runs = new HandlerRuns({ timeoutMs: 60_000, releasesSignal: false, concurrency: 2 });
    const delivery = { message: { id: "m", body: {} }, attempt: 1 } as unknown as Delivery;
    let commit: () => void = () => {};
    const settleAfter = new Promise<void>((resolve) => {
      commit = resolve;
    });
    const returned = runs.run(() => ({ status: "ACKNOWLEDGED", settleAfter }) as never, delivery);
    const hanging = runs.run(() => new Promise<never>(() => {}), delivery);
    await new Promise<void>((resolve) => setImmediate(resolve));
    runs.abortAll(new Error("subscription closed"));
    expect(await hanging).toEqual({ kind: "stopped" });
    let drained = false;
    const draining = runs.drain().then(() => {
      drained = true;
    });
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(drained).toBe(false);
    commit();
    await draining;
    expect(await returned).toMatchObject({ kind: "returned" });
  });
});
