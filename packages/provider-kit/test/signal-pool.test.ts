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

  it("keeps nothing without releasesSignal, and at most `max` controllers with it", () => {
    const off = new SignalPool(false, 4);
    const one = off.take();
    off.give(one);
    expect(off.take()).not.toBe(one);

    const pool = new SignalPool(true, 1);
    const a = pool.take();
    const b = pool.take();
    pool.give(a);
    pool.give(b);
    expect(pool.take()).toBe(a);
    expect(pool.take()).not.toBe(b);
  });
});
