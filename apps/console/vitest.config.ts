import { defineConfig, mergeConfig } from "vitest/config";
import { sharedVitestConfig } from "../../vitest.shared.ts";

/** Browser tests build the console once first (test/build-once.ts) so no manual build is needed. */
export default mergeConfig(
  sharedVitestConfig,
  defineConfig({
    test: {
      globalSetup: ["test/build-once.ts"],
      testTimeout: 180_000,
      hookTimeout: 180_000,
    },
  }),
);
