import { describe, expect, it } from "vitest";
import { SignalPool } from "../src/index.js";

describe("SignalPool", () => {
  it("hands a settled controller out again only when it was never aborted and has no listener", () => {
    const pool = new SignalPool(true, 4);
    const first = pool.take();
    pool.give(first);
    expect(pool.take()).toBe(first);

    first.signal.addEventListener("abort", () => {});
    pool.give(first);
    expect(pool.take()).not.toBe(first);

    const aborted = pool.take();
    aborted.abort(new Error("timed out"));
    pool.give(aborted);
    const next = pool.take();
    expect(next).not.toBe(aborted);
    expect(next.signal.aborted).toBe(false);
  });

  it("keeps nothing without releasesSignal, and with it as many as were out at once", () => {
    const off = new SignalPool(false, 4);
    const one = off.take();
    off.give(one);
    expect(off.take()).not.toBe(one);

    // Two out at once (one handler, one delivery awaiting its settleAfter): both are kept.
    const pool = new SignalPool(true, 1);
    const a = pool.take();
    const b = pool.take();
    pool.give(a);
    pool.give(b);
    expect(pool.take()).toBe(b);
    expect(pool.take()).toBe(a);
    // A third beyond that peak: three were out at once now, so all three are kept.
    const c = pool.take();
    pool.give(a);
    pool.give(b);
    pool.give(c);
    expect(new Set([pool.take(), pool.take(), pool.take()])).toEqual(new Set([a, b, c]));
  });

  it("keeps no more than the most that were out at once", () => {
    const pool = new SignalPool(true, 1);
    const a = pool.take();
    pool.give(a);
    // One out at a time: a stray controller given back beyond that is not kept.
    const stray = new AbortController();
    pool.give(a);
    pool.give(stray);
    expect(pool.take()).toBe(a);
    expect(pool.take()).not.toBe(stray);
  });
});
