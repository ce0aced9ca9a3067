import { describe, expect, it } from "vitest";
import { DEFAULT_RETRY_POLICY, resolveRetryPolicy, retryDelayMs } from "../src/index.js";

describe("retry policy", () => {
  it("has the documented defaults", () => {
    expect(DEFAULT_RETRY_POLICY).toEqual({
      maxAttempts: 3,
      initialDelayMs: 1000,
      multiplier: 2,
      maxDelayMs: 60_000,
    });
    expect(Object.isFrozen(DEFAULT_RETRY_POLICY)).toBe(true);
  });

  it("grows the delay exponentially from the first retry and caps it", () => {
    const policy = resolveRetryPolicy({ initialDelayMs: 100, multiplier: 3, maxDelayMs: 1000 });
    expect([2, 3, 4, 5].map((n) => retryDelayMs(policy, n))).toEqual([100, 300, 900, 1000]);
  });

  it("fills a partial policy with defaults", () => {
    expect(resolveRetryPolicy({ maxAttempts: 5 })).toEqual({ ...DEFAULT_RETRY_POLICY, maxAttempts: 5 });
  });
});
