import { defineConfig, mergeConfig } from "vitest/config";
import { sharedVitestConfig } from "../../vitest.shared.ts";

// One provider's cases at a time: a case's completion bound is about the engine, not about how many
// other brokers' cases share the two cores with it.
export default mergeConfig(
  sharedVitestConfig,
  defineConfig({
    test: {
      fileParallelism: false,
      testTimeout: 900_000,
      hookTimeout: 180_000,
    },
  }),
);
