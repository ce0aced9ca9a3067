import { defineConfig, mergeConfig } from "vitest/config";
import { sharedVitestConfig } from "../../vitest.shared.ts";

// Scenarios run one after another: each one kills and restarts real server processes and times
// its kills by what the sink has written, so they must not compete with each other for the CPU.
export default mergeConfig(
  sharedVitestConfig,
  defineConfig({
    test: {
      fileParallelism: false,
      sequence: { concurrent: false },
      testTimeout: 300_000,
      hookTimeout: 120_000,
    },
  }),
);
