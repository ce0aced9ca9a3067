import { defineConfig, mergeConfig } from "vitest/config";
import { sharedVitestConfig } from "../../vitest.shared.ts";

// Scenarios run one after another: each starts three real servers, and they must not compete with
// another scenario's servers for the machine's CPU.
export default mergeConfig(
  sharedVitestConfig,
  defineConfig({
    test: {
      fileParallelism: false,
      sequence: { concurrent: false },
      testTimeout: 600_000,
      hookTimeout: 180_000,
    },
  }),
);
