import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { type RunSummary, runFactflow } from "./harness/cli-process.js";
import { shapeArbitrary } from "./harness/generator.js";
import { expectedOutcome } from "./harness/oracle.js";
import { modelSettings } from "./harness/settings.js";
import { toPipelineConfig } from "./harness/to-config.js";

const fixtures = fileURLToPath(new URL("../fixtures/", import.meta.url));
const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), "factflow-model-cli-"));
  dirs.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Per route: messages, completed, failed, retries, dead letters, as `factflow run --json` prints them. */
type Counts = Record<string, [number, number, number, number, number]>;

/** The six smallest shapes a new user writes first, and the summary each must print. */
const SMALLEST: Record<string, { counts: Counts; deadLetters: number }> = {
  "one-route": { counts: { a: [1, 1, 0, 0, 0] }, deadLetters: 0 },
  "two-route-chain": { counts: { a: [1, 1, 0, 0, 0], b: [1, 1, 0, 0, 0] }, deadLetters: 0 },
  "fan-out": { counts: { a: [1, 1, 0, 0, 0], b: [3, 3, 0, 0, 0] }, deadLetters: 0 },
  "fan-in": { counts: { a: [1, 1, 0, 0, 0], b: [3, 3, 0, 0, 0], c: [1, 1, 0, 0, 0] }, deadLetters: 0 },
  "dead-letter": { counts: { a: [1, 1, 0, 0, 0], b: [1, 0, 1, 1, 1] }, deadLetters: 1 },
  "drop-all": { counts: { a: [1, 1, 0, 0, 0], b: [2, 0, 0, 0, 0] }, deadLetters: 0 },
};

function countsOf(summary: RunSummary): Counts {
  return Object.fromEntries(
    summary.routes.map((r) => [r.route, [r.messages, r.completed, r.failed, r.retries, r.dead_letters]]),
  );
}

describe("the smallest shapes through factflow run", () => {
  for (const mode of ["file", "memory"] as const) {
    for (const [name, want] of Object.entries(SMALLEST)) {
      it(`${name} on embedded ${mode}`, async () => {
        const run = await runFactflow(["run", join(fixtures, "smoke", `${name}.yaml`), "--json"], {
          FACTFLOW_DATA_DIR: tempDir(),
          FACTFLOW_EMBEDDED_MODE: mode,
        });
        expect(run.code, `exit code; stderr:\n${run.stderr}`).toBe(0);
        const summary = JSON.parse(run.stdout) as RunSummary;
        expect(summary.status).toBe("completed");
        expect(countsOf(summary)).toEqual(want.counts);
        expect(summary.dead_letters).toBe(want.deadLetters);
      });
    }
  }
});

describe("generated shapes through factflow run (embedded file)", () => {
  const settings = modelSettings();
  const cases = fc.sample(
    shapeArbitrary({ priorities: true, fifo: true, orderedGroups: true, maxArrivals: 150 }),
    { numRuns: 4, seed: settings.seed ?? 20261203 },
  );
  cases.forEach((shape, index) => {
    it(`case ${index} (seed ${settings.seed ?? 20261203})`, async () => {
      const dir = tempDir();
      const sinkFile = join(dir, "sink.txt");
      writeFileSync(sinkFile, "");
      const configFile = join(dir, "pipeline.yaml");
      const config = toPipelineConfig(shape, { module: join(fixtures, "model-adapters.ts"), sinkFile });
      writeFileSync(configFile, JSON.stringify(config, null, 2));
      const run = await runFactflow(["run", configFile, "--json"], {
        FACTFLOW_DATA_DIR: join(dir, "data"),
        FACTFLOW_EMBEDDED_MODE: "file",
        FACTFLOW_ADAPTER_DIRS: fixtures,
      });
      expect(run.code, `exit code; config:\n${JSON.stringify(config)}\nstderr:\n${run.stderr}`).toBe(0);
      const summary = JSON.parse(run.stdout) as RunSummary;
      const expected = expectedOutcome(shape);
      expect(summary.status).toBe(expected.status);
      const want: Counts = {};
      for (const route of shape.routes) {
        const o = expected.routes[route.name];
        if (o === undefined) continue;
        const dead = o.dead.rejected + o.dead.exhausted + o.dead.incomplete;
        want[route.name] = [o.arrived, o.completed, dead, o.retries, dead];
      }
      expect(countsOf(summary)).toEqual(want);
      const sunk = readFileSync(sinkFile, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .sort();
      const wantSunk = shape.routes
        .flatMap((r) => (expected.routes[r.name]?.sunk ?? []).map((k) => `${r.name} ${k}`))
        .sort();
      expect(sunk).toEqual(wantSunk);
    });
  });
});
