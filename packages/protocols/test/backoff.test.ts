import { describe, expect, it } from "vitest";
import { backoffDelayMs } from "../src/index.js";

describe("backoffDelayMs", () => {
  it("doubles from the initial delay up to the cap", () => {
    const curve = { initialDelayMs: 25, maxDelayMs: 500 };
    expect([1, 2, 3, 4, 5, 6, 7].map((retry) => backoffDelayMs(curve, retry))).toEqual([
      25, 50, 100, 200, 400, 500, 500,
    ]);
    expect(backoffDelayMs(curve, 0)).toBe(25);
  });

  it("uses the multiplier and takes at most the jitter share off", () => {
    expect(backoffDelayMs({ initialDelayMs: 10, maxDelayMs: 10_000, multiplier: 3 }, 3)).toBe(90);
    for (let i = 0; i < 200; i++) {
      const delay = backoffDelayMs({ initialDelayMs: 1000, maxDelayMs: 1000, jitter: 0.2 }, 4);
      expect(delay).toBeGreaterThanOrEqual(800);
      expect(delay).toBeLessThanOrEqual(1000);
    }
  });
});
