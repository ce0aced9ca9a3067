import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.mjs"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // The boundary cases are CPU-bound child processes: one per core.
    maxConcurrency: 2,
    reporters: ["default"],
  },
});
