import { defineConfig } from "vitest/config";

/**
 * Shared vitest settings. The `factflow-source` condition makes workspace packages resolve to their
 * `src/` so tests never depend on a prior build.
 */
export const sharedVitestConfig = defineConfig({
  resolve: { conditions: ["factflow-source"] },
  ssr: { resolve: { conditions: ["factflow-source"] } },
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: ["default"],
  },
});
