import { describe, expect, it } from "vitest";
import { createProvider, redisTimingOf } from "../src/provider-factory.js";
import { loadSettings } from "../src/settings.js";

const silent = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child() {
    return silent;
  },
};

describe("provider factory", () => {
  it("sets Redis's visibility timeout to the cluster lease and sweeps every quarter of it", () => {
    expect(redisTimingOf(5000)).toEqual({ visibilityTimeoutMs: 5000, reclaimIntervalMs: 1250 });
    expect(redisTimingOf(10_000)).toEqual({ visibilityTimeoutMs: 10_000, reclaimIntervalMs: 2500 });
    expect(redisTimingOf(1000).reclaimIntervalMs).toBe(250);
  });

  it("builds the Redis provider with the lease's timing and the key prefix (not connected)", async () => {
    const settings = loadSettings({
      env: { FACTFLOW_PROVIDER: "redis", FACTFLOW_REDIS_KEY_PREFIX: "ff-test:" },
      cwd: "/tmp",
    });
    const provider = await createProvider(settings, silent, { leaseMs: 4000 });
    expect(provider.name).toBe("redis");
    const { config } = provider as unknown as { config: Record<string, unknown> };
    expect(config).toMatchObject({
      keyPrefix: "ff-test:",
      visibilityTimeoutMs: 4000,
      reclaimIntervalMs: 1000,
    });
    await provider.close();
  });
});
