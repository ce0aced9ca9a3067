import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { uuidv7 } from "@factflow/engine";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import { type ExecutionStoreProtocol, type PipelineConfig, silentLogger } from "@factflow/protocols";
import { FactflowMetrics, RetentionJob } from "@factflow/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "./helpers.js";

const DAY_MS = 86_400_000;
const snapshot = {
  name: "retention-test",
  init: { route: "a" },
  routes: { a: { inbound: { queue: "a.in" }, adapters: [{ type: "noop" }], outbound: [] } },
} as unknown as PipelineConfig;

let dir: string;
let db: LineageDatabase;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "factflow-retention-"));
  db = await openLineageDatabase({ dataDir: dir });
}, 120_000);

afterAll(async () => {
  await db?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

async function execution(finished: boolean): Promise<string> {
  const record = await db.executions.createExecution({
    id: uuidv7(),
    configName: "retention-test",
    configVersion: null,
    configSnapshot: snapshot,
    input: null,
  });
  if (finished) await db.executions.finishExecution(record.id, "completed");
  return record.id;
}

/** The real store, with each delete held for `ms` and the peak of concurrent deletes recorded. */
function slowStore(ms: number) {
  const stats = { calls: 0, active: 0, peak: 0 };
  const store: Pick<ExecutionStoreProtocol, "deleteExecutionsBefore"> = {
    async deleteExecutionsBefore(before) {
      stats.calls += 1;
      stats.active += 1;
      stats.peak = Math.max(stats.peak, stats.active);
      try {
        await new Promise((r) => setTimeout(r, ms));
        return await db.executions.deleteExecutionsBefore(before);
      } finally {
        stats.active -= 1;
      }
    },
  };
  return { store, stats };
}

describe("RetentionJob", () => {
  it("deletes finished executions older than N days on its schedule, keeping running ones", async () => {
    const finished = await execution(true);
    const running = await execution(false);
    const metrics = new FactflowMetrics();
    // The clock says two days have passed, so what just finished is older than 1 day.
    const job = new RetentionJob({
      executions: db.executions,
      logger: silentLogger,
      metrics,
      retentionDays: 1,
      intervalMs: 30,
      initialDelayMs: 0,
      now: () => Date.now() + 2 * DAY_MS,
    });
    job.start();
    try {
      const timer = (job as unknown as { timer: NodeJS.Timeout }).timer;
      expect(timer.hasRef()).toBe(false);
      await waitFor(
        async () => ((await db.executions.getExecution(finished)) === undefined ? true : undefined),
        10_000,
        "the finished execution to be deleted",
      );
      expect(await db.executions.getExecution(running)).toMatchObject({ status: "running" });
      await waitFor(async () => (job.count("schedule", "ok") >= 2 ? true : undefined), 60_000, "a 2nd run");
    } finally {
      await job.stop();
    }
    const text = await metrics.render();
    expect(text).toMatch(/factflow_retention_runs_total\{outcome="ok",trigger="schedule"\} [2-9]/);
    expect(text).toMatch(/^factflow_retention_executions_deleted_total [1-9]/m);
    await db.executions.finishExecution(running, "cancelled");
  });

  it("keeps executions younger than N days", async () => {
    const young = await execution(true);
    const job = new RetentionJob({ executions: db.executions, logger: silentLogger, retentionDays: 0 });
    const result = await job.run(1);
    expect(result).toMatchObject({ olderThanDays: 1, trigger: "request" });
    expect(await db.executions.getExecution(young)).toBeDefined();
    await expect(job.run(-1)).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(job.run(Number.NaN)).rejects.toMatchObject({ code: "invalid_argument" });
  });

  it("never overlaps: on-demand runs queue up, scheduled ticks during a run are skipped", async () => {
    const { store, stats } = slowStore(150);
    const job = new RetentionJob({
      executions: store,
      logger: silentLogger,
      retentionDays: 30,
      intervalMs: 20,
      initialDelayMs: 0,
    });
    job.start();
    try {
      const results = await Promise.all([job.run(30), job.run(30), job.run(30)]);
      expect(results.map((r) => r.trigger)).toEqual(["request", "request", "request"]);
      await waitFor(async () => (job.count("schedule", "skipped") > 0 ? true : undefined), 60_000, "a skip");
    } finally {
      await job.stop();
    }
    expect(stats.peak).toBe(1);
    expect(stats.calls).toBeGreaterThanOrEqual(3);
  });

  it("does not schedule anything when retention is off (0 days)", async () => {
    const { store, stats } = slowStore(0);
    const job = new RetentionJob({
      executions: store,
      logger: silentLogger,
      retentionDays: 0,
      intervalMs: 10,
      initialDelayMs: 0,
    });
    job.start();
    // Long enough for several ticks had the schedule started.
    await new Promise((r) => setTimeout(r, 100));
    await job.stop();
    expect(stats.calls).toBe(0);
    expect((job as unknown as { timer: unknown }).timer).toBeUndefined();
  });
});
