import { defineConfig } from "vitest/config";

/**
 * `pnpm test`: every package's suite in one vitest run. Each package keeps its own config (its
 * vitest.config.* is the project); one scheduler packs all test files onto the same two workers, so
 * a package whose suite ends in one long file no longer leaves a worker idle while the next package
 * waits its turn. The crash and cluster suites are not projects here: they run alone
 * (`pnpm test:crash`, `pnpm test:cluster`). `pnpm test:packages` runs the packages one after another.
 */
export default defineConfig({
  test: {
    projects: [
      "packages/*/vitest.config.ts",
      "packages/infra/*/vitest.config.ts",
      "apps/*/vitest.config.ts",
      "scripts/vitest.config.mjs",
    ],
    // The same as every project's own setting (vitest.shared.ts): projects in one group must agree.
    maxWorkers: 2,
    reporters: ["default"],
  },
});
