import { tmpdir } from "node:os";
import { join } from "node:path";
import { defineConfig } from "vitest/config";

// Every embedded (PGlite) database a test opens, in its own process or in a server it starts, is a
// copy of one made once per PGlite version (docs/lineage.md): initdb took 17–19 s per database on
// this loaded machine, a copy takes well under one.
process.env.FACTFLOW_PGLITE_TEMPLATE_DIR ??= join(tmpdir(), "factflow-test-pglite-templates");

/**
 * Shared vitest settings. The `factflow-source` condition makes workspace packages resolve to their
 * `src/` so tests never depend on a prior build.
 */
export const sharedVitestConfig = defineConfig({
  resolve: { conditions: ["factflow-source"] },
  ssr: { resolve: { conditions: ["factflow-source"] } },
  test: {
    include: ["test/**/*.test.ts"],
    // Two test files at a time: most of a file's time is spent waiting on brokers, databases and
    // child processes, not on this machine's two cores (the engine's suite: 251 s with one worker,
    // 139 s with two, same load). Suites whose scenarios must not overlap set fileParallelism: false.
    maxWorkers: 2,
    // Deadlines for a hang, not for speed: a test that starts server processes on a loaded 2-core
    // machine took over 30 s (CI with busy cores), and a timeout there says nothing about Factflow.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // `expect.poll` waits for a condition, never for a deadline: its default (1 s) is an upper bound
    // on time that a busy machine breaks (the console's lineage tree took longer under load).
    expect: { poll: { timeout: 60_000, interval: 100 } },
    reporters: ["default"],
  },
});
