import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { differences } from "./harness/check.js";
import { shapeArbitrary } from "./harness/generator.js";
import { type ModelLineageStore, openModelLineage } from "./harness/model-lineage.js";
import { expectedOutcome, totalArrivals } from "./harness/oracle.js";
import { MODEL_TARGETS, type ModelTarget, unreachable } from "./harness/providers.js";
import { type ModelRun, openModelRun } from "./harness/runner.js";
import { modelSettings } from "./harness/settings.js";
import type { Shape } from "./harness/shape.js";
import { toPipelineConfig } from "./harness/to-config.js";

const settings = modelSettings();
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const here = fileURLToPath(new URL(".", import.meta.url));
const regressionsDir = join(here, "..", "fixtures", "regressions");
const failuresDir = join(here, "..", ".failures");
/** How long shrinking a failure may re-run pipelines before the smallest failure so far is reported. */
const SHRINK_BUDGET_MS = 600_000;
/** The time a generated case may take within the test's timeout (cases take well under a second). */
const CASE_ALLOWANCE_MS = 5_000;

interface Regression {
  readonly name: string;
  readonly why: string;
  readonly shape: Shape;
}

const regressions: Regression[] = readdirSync(regressionsDir)
  .filter((f) => f.endsWith(".json"))
  .sort()
  .map((f) => JSON.parse(readFileSync(join(regressionsDir, f), "utf8")) as Regression);

/** Whether `target` can run `shape` (a regression found on one broker may use what another lacks). */
function fits(target: ModelTarget, shape: Shape): boolean {
  return shape.routes.every(
    (r) =>
      (r.priorityLevels === undefined || target.limits.priorities) &&
      (r.ordering === undefined || target.limits.fifo) &&
      (r.groupByBucket !== true || target.limits.orderedGroups),
  );
}

/**
 * Runs one case: the shape, its oracle, then a healed replay of dead letters of the first route that
 * has any. Healing can open branches that moved nothing before, so the replay takes as many of those
 * dead letters as keep it within `maxArrivals` messages (none when even one would not fit).
 */
async function runCase(model: ModelRun, shape: Shape, maxArrivals: number): Promise<string[]> {
  const expected = expectedOutcome(shape);
  const observed = await model.run(shape);
  const problems = differences(shape, expected, observed);
  if (problems.length > 0) return problems;
  const deadRoute = shape.routes.find((r) => (expected.routes[r.name]?.deadKeys.length ?? 0) > 0);
  if (deadRoute === undefined) return [];
  const inputs: string[] = [];
  for (const key of expected.routes[deadRoute.name]?.deadKeys ?? []) {
    const next = [...inputs, key];
    if (
      totalArrivals(expectedOutcome(shape, { start: deadRoute.name, inputs: next, healed: true })) >
      maxArrivals
    )
      break;
    inputs.push(key);
  }
  if (inputs.length === 0) return [];
  const replayed = await model.replayDead(shape, observed, deadRoute.name, inputs);
  const healedExpected = expectedOutcome(shape, { start: deadRoute.name, inputs, healed: true });
  return differences(shape, healedExpected, replayed).map(
    (p) => `replay of ${deadRoute.name}'s dead letters: ${p}`,
  );
}

const targets = MODEL_TARGETS.filter(
  (t) => settings.providers === undefined || settings.providers.includes(t.name),
);

for (const target of targets) {
  describe(`model: ${target.name}`, () => {
    let model: ModelRun | undefined;
    let store: ModelLineageStore | undefined;
    let cleanup = () => {};
    let skipped: string | undefined;

    beforeAll(async () => {
      skipped = await unreachable(target);
      if (skipped !== undefined) {
        if (required) throw new Error(`[model] ${target.name}: ${skipped}`);
        console.warn(`[model] ${target.name} skipped: ${skipped}`);
        return;
      }
      const made = target.create();
      cleanup = made.cleanup;
      store = await openModelLineage(settings.lineage);
      model = await openModelRun(made.queue, store.lineage === undefined ? {} : { lineage: store.lineage });
    });
    afterAll(async () => {
      await model?.close();
      await store?.close();
      cleanup();
    });

    it("regression shapes", async (ctx) => {
      if (model === undefined) return ctx.skip(skipped);
      for (const regression of regressions) {
        if (!fits(target, regression.shape)) continue;
        const problems = await runCase(model, regression.shape, target.maxArrivals);
        expect(problems, `${regression.name}: ${regression.why}`).toEqual([]);
      }
    });

    const runs = settings.runs ?? target.runs;
    it(
      "generated shapes match the oracle",
      async (ctx) => {
        if (model === undefined) return ctx.skip(skipped);
        const current = model;
        const started = Date.now();
        // Shrinking re-runs the pipeline for every candidate. Past the shrink budget, candidates
        // pass without running, so fast-check stops at the smallest case that really failed. A time
        // limit on the whole check would also cut a long soak short without saying so.
        let firstFailureAt: number | undefined;
        const details = await fc.check(
          fc.asyncProperty(
            shapeArbitrary({ ...target.limits, maxArrivals: target.maxArrivals }),
            async (shape) => {
              if (firstFailureAt !== undefined && Date.now() - firstFailureAt > SHRINK_BUDGET_MS) return;
              const problems = await runCase(current, shape, target.maxArrivals);
              if (problems.length === 0) return;
              firstFailureAt ??= Date.now();
              throw new Error(problems.join("\n"));
            },
          ),
          {
            numRuns: runs,
            ...(settings.seed === undefined ? {} : { seed: settings.seed }),
            ...(settings.path === undefined ? {} : { path: settings.path }),
          },
        );
        console.log(
          `[model] ${target.name}: ${details.numRuns} cases, seed ${details.seed}, ${((Date.now() - started) / 1000).toFixed(1)} s${details.failed ? ", FAILED" : ""}`,
        );
        if (details.failed) {
          const shape = details.counterexample?.[0] as Shape | undefined;
          mkdirSync(failuresDir, { recursive: true });
          const file = join(failuresDir, `${target.name}-${details.seed}.json`);
          if (shape !== undefined)
            writeFileSync(
              file,
              `${JSON.stringify({ name: `${target.name}-${details.seed}`, why: "describe what it found", shape }, null, 2)}\n`,
            );
          throw new Error(
            [
              `[model] ${target.name} failed: replay with pnpm test:model --provider ${target.name} --seed ${details.seed} --path ${details.counterexamplePath}`,
              shape === undefined
                ? ""
                : `shrunk shape written to ${file}; its config:\n${JSON.stringify(toPipelineConfig(shape), null, 2)}`,
              details.errorInstance instanceof Error
                ? details.errorInstance.message
                : String(details.errorInstance),
            ].join("\n"),
          );
        }
      },
      // A case takes well under a second on a quiet machine; a loaded one and shrinking get room.
      CASE_ALLOWANCE_MS * runs + SHRINK_BUDGET_MS + 60_000,
    );
  });
}
