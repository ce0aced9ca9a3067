/**
 * `pnpm bench engine [N] [rounds]`: a 3-route pipeline, fan-out then fan-in, of N messages.
 *
 * - `baseline`: the same topology hand-written on the bare embedded provider (memory mode): one
 *   message fans out to N on `work`, each is relayed to `collect`, which counts them;
 * - `engine`: `@factflow/engine` running `split → json_transform → batch(100)` with lineage on PGlite
 *   (every message and adapter hop recorded), same concurrency and prefetch per route.
 *
 * - `strict`: the engine with `strictLineage: true` (one durable lineage commit before every
 *   publish, as multi-process deployments need).
 * - `postgres`: the `engine` mode with lineage in PostgreSQL (a scratch database of `DATABASE_URL`,
 *   dropped at the end), printed as a second line `{"bench":"engine","lineage":"postgres",…}`.
 *   Its `ackFirst*` fields are the same mode as it ran before deliveries waited for their lineage
 *   commit: the provider acknowledges as soon as the handler returns (no `flushSettled`) and the
 *   writer holds no open row (`holdOpenMs: 0`: every row inserted open, then updated), run in the
 *   same rounds: what the durable-before-ack rule costs and saves.
 *   `lineageWritesPerHop` is lineage writes (inserts and updates) per delivery (2N + 1 of them), and
 *   `postgresCpuUsPerMsg` PostgreSQL's CPU per message of N.
 * - `memory`: the `engine` mode with the in-memory lineage store (nothing persisted), a third line
 *   `{"bench":"engine","lineage":"memory",…}`: what the engine costs without any database.
 *
 * The three modes run `rounds` times (default 2), alternating; each mode's best run is reported,
 * with the CPU time the process spent on it: every thread's, so PGlite's worker thread is counted
 * with the main thread (on a shared machine CPU ms are steadier than wall-clock rates, though one
 * run's figure still varies by a factor of two under load: compare medians over many runs).
 * Prints one JSON line: msgs/s of both modes (N / time from the first publish to the last message
 * handled, for the engine to the `completed` event), their ratio, and the completion delay (last
 * settled delivery → `completed` event, as measured by the orchestrator).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { adapters } from "@factflow/adapters";
import { createEngine, type ExecutionEvent, loadPipelineConfig } from "@factflow/engine";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import {
  type ArtefactSidecar,
  type LineageProtocol,
  MessageStatus,
  type StorageProtocol,
} from "@factflow/protocols";
import { processCpuSampler } from "./_process-cpu.js";
import { createScratchDatabase } from "./_scratch-database.js";

const WORK_CONCURRENCY = 8;
const WORK_PREFETCH = 32;
const BATCH = 100;

/** split → json_transform → batch: one message fans out to N, relayed, then collected. */
export const BENCH_PIPELINE = `
name: bench
init: { route: split }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: ${WORK_CONCURRENCY}, prefetch: ${WORK_PREFETCH} }
    adapters: [{ type: json_transform, config: { set: { seen: true } } }]
    outbound: [collect.in]
  collect:
    inbound: { queue: collect.in }
    adapters: [{ type: batch, config: { size: ${BATCH}, timeout_ms: 1000 } }]
`;

/** Artefacts are not part of this pipeline; the engine still needs a StorageProtocol. */
const noStorage: StorageProtocol = {
  put: async (key) => ({ key, contentType: "", size: 0, sha256: "", createdAt: "" }) as ArtefactSidecar,
  get: async () => undefined,
  head: async () => undefined,
  list: async () => [],
  delete: async () => false,
  describe: () => "none",
};

export async function baseline(n: number): Promise<{ msgsPerSec: number; ms: number; cpuMs: number }> {
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  let arrived = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  await queue.subscribe(
    "/queue/bench/collect.in",
    () => {
      if (++arrived === n) done();
      return MessageStatus.ACKNOWLEDGED;
    },
    { subscription: "collect", concurrency: BATCH, prefetch: BATCH },
  );
  await queue.subscribe(
    "/queue/bench/work.in",
    async (d) => {
      await queue.publish("/queue/bench/collect.in", { body: d.message.body });
      return MessageStatus.ACKNOWLEDGED;
    },
    { subscription: "work", concurrency: WORK_CONCURRENCY, prefetch: WORK_PREFETCH },
  );
  await queue.subscribe(
    "/queue/bench/split.in",
    async (d) => {
      const items = (d.message.body as { items: number[] }).items;
      let next = 0;
      const worker = async () => {
        while (next < items.length) {
          const item = items[next++] as number;
          await queue.publish("/queue/bench/work.in", { body: { item } });
        }
      };
      await Promise.all(Array.from({ length: 64 }, worker));
      return MessageStatus.ACKNOWLEDGED;
    },
    { subscription: "split" },
  );
  const start = performance.now();
  const cpu = process.cpuUsage();
  await queue.publish("/queue/bench/split.in", { body: { items: Array.from({ length: n }, (_, i) => i) } });
  await finished;
  const ms = performance.now() - start;
  const cpuMs = cpuMsSince(cpu);
  await queue.close();
  return { msgsPerSec: Math.round(n / (ms / 1000)), ms: Math.round(ms), cpuMs };
}

/** Where a run keeps lineage: PGlite in a temporary directory, a PostgreSQL URL, or memory. */
type LineageTarget = { databaseUrl?: string; ackFirst?: boolean } | "memory" | undefined;

/** The store without `flushSettled`: the provider acknowledges as soon as the handler returns. */
function ackingFirst(lineage: LineageProtocol): LineageProtocol {
  return new Proxy(lineage, {
    get(target, key) {
      if (key === "flushSettled") return undefined;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export async function engineRun(n: number, strictLineage = false, target?: LineageTarget) {
  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-engine-"));
  const writer = typeof target === "object" && target.ackFirst === true ? { writer: { holdOpenMs: 0 } } : {};
  const db = await openLineageDatabase(
    target === "memory"
      ? { memory: true }
      : target?.databaseUrl === undefined
        ? { dataDir: join(dir, "db"), ...writer }
        : { databaseUrl: target.databaseUrl, ...writer },
  );
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: typeof target === "object" && target.ackFirst === true ? ackingFirst(db.lineage) : db.lineage,
    executions: db.executions,
    storage: noStorage,
    adapters,
    strictLineage,
  });
  try {
    const config = await loadPipelineConfig(BENCH_PIPELINE, { registry: engine.registry });
    const start = performance.now();
    const cpu = process.cpuUsage();
    const databaseCpu = sampleCpu?.();
    const record = await engine.service.create({
      config,
      input: { items: Array.from({ length: n }, (_, i) => i) },
    });
    let last: ExecutionEvent | undefined;
    for await (const event of engine.service.events(record.id)) last = event;
    const ms = performance.now() - start;
    const cpuMs = cpuMsSince(cpu);
    const databaseCpuAfter = sampleCpu?.();
    // PostgreSQL's processes (the writer's backends), when this run's lineage is there.
    const postgresCpuMs =
      typeof target === "object" && databaseCpu !== undefined && databaseCpuAfter !== undefined
        ? Math.round(databaseCpuAfter.postgres - databaseCpu.postgres)
        : undefined;
    if (last?.type !== "completed")
      throw new Error(`[factflow/bench] engine run ended ${last?.type}: ${JSON.stringify(last?.data)}`);
    const messages = await db.lineage.rows(record.id, { kind: "message", limit: 1 });
    const adapterRows = await db.lineage.rows(record.id, { kind: "adapter", limit: 1 });
    return {
      msgsPerSec: Math.round(n / (ms / 1000)),
      ms: Math.round(ms),
      cpuMs,
      postgresCpuMs,
      completionDelayMs: last.data.completionDelayMs as number,
      gateDelayMs: last.data.gateDelayMs as number,
      lineageRows: messages.total + adapterRows.total,
      lineageLost: db.lineage.counters().lost,
      lineageWrites: db.lineage.counters().written,
    };
  } finally {
    await engine.shutdown();
    await queue.close();
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Samples PostgreSQL's CPU (the engine bench has no broker process); undefined without `/proc`. */
const sampleCpu = processCpuSampler(() => false);

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return Math.round((used.user + used.system) / 1000);
}

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 3000);
  const rounds = Number(args[1] ?? 2);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] N must be a positive integer, got "${args[0]}"`);
  // Warm-up, so neither mode pays for JIT and module loading.
  await baseline(Math.min(n, 500));
  // The machine is shared: run both modes `rounds` times, alternating, and keep each mode's best.
  const bases: Awaited<ReturnType<typeof baseline>>[] = [];
  const engines: Awaited<ReturnType<typeof engineRun>>[] = [];
  const stricts: Awaited<ReturnType<typeof engineRun>>[] = [];
  const postgresRuns: Awaited<ReturnType<typeof engineRun>>[] = [];
  const memoryRuns: Awaited<ReturnType<typeof engineRun>>[] = [];
  const ackFirstRuns: Awaited<ReturnType<typeof engineRun>>[] = [];
  const pgliteAckFirstRuns: Awaited<ReturnType<typeof engineRun>>[] = [];
  const scratch = await createScratchDatabase();
  try {
    for (let i = 0; i < rounds; i++) {
      bases.push(await baseline(n));
      engines.push(await engineRun(n));
      pgliteAckFirstRuns.push(await engineRun(n, false, { ackFirst: true }));
      // Strict lineage: every publish registered durably first, as multi-process deployments need.
      stricts.push(await engineRun(n, true));
      postgresRuns.push(await engineRun(n, false, { databaseUrl: scratch.url }));
      // As before the durable-before-ack rule: acknowledged at once, every row inserted open.
      ackFirstRuns.push(await engineRun(n, false, { databaseUrl: scratch.url, ackFirst: true }));
      memoryRuns.push(await engineRun(n, false, "memory"));
    }
  } finally {
    await scratch.drop();
  }
  const best = <T extends { msgsPerSec: number }>(runs: T[]) =>
    runs.reduce((a, b) => (b.msgsPerSec > a.msgsPerSec ? b : a));
  const base = best(bases);
  const eng = best(engines);
  const strict = best(stricts);
  console.log(
    JSON.stringify({
      bench: "engine",
      n,
      rounds,
      provider: "embedded-memory",
      lineage: "pglite",
      baselineMsgsPerSec: base.msgsPerSec,
      baselineMs: base.ms,
      baselineCpuMs: base.cpuMs,
      engineMsgsPerSec: eng.msgsPerSec,
      engineMs: eng.ms,
      engineCpuMs: eng.cpuMs,
      ratio: Math.round((eng.msgsPerSec / base.msgsPerSec) * 1000) / 1000,
      completionDelayMs: eng.completionDelayMs,
      gateDelayMs: eng.gateDelayMs,
      completionDelayMsAllRounds: engines.map((e) => e.completionDelayMs),
      strictLineageMsgsPerSec: strict.msgsPerSec,
      strictLineageRatio: Math.round((strict.msgsPerSec / base.msgsPerSec) * 1000) / 1000,
      strictLineageMs: strict.ms,
      strictLineageCpuMs: strict.cpuMs,
      strictLineageCompletionDelayMs: strict.completionDelayMs,
      lineageRows: eng.lineageRows,
      lineageWrites: eng.lineageWrites,
      lineageWritesPerHop: perHopOf(eng.lineageWrites, n),
      ackFirstMsgsPerSec: best(pgliteAckFirstRuns).msgsPerSec,
      ackFirstLineageWritesPerHop: perHopOf(best(pgliteAckFirstRuns).lineageWrites, n),
      strictLineageWrites: strict.lineageWrites,
      strictLineageWritesPerHop: perHopOf(strict.lineageWrites, n),
      lineageLost: eng.lineageLost + strict.lineageLost,
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
    }),
  );
  const pg = best(postgresRuns);
  const ackFirst = best(ackFirstRuns);
  const perHop = (writes: number) => perHopOf(writes, n);
  const usPerMsg = (cpuMs: number | undefined) =>
    cpuMs === undefined ? undefined : Math.round((cpuMs * 1000) / n);
  console.log(
    JSON.stringify({
      bench: "engine",
      n,
      rounds,
      provider: "embedded-memory",
      lineage: "postgres",
      baselineMsgsPerSec: base.msgsPerSec,
      engineMsgsPerSec: pg.msgsPerSec,
      engineMs: pg.ms,
      engineCpuMs: pg.cpuMs,
      ratio: Math.round((pg.msgsPerSec / base.msgsPerSec) * 1000) / 1000,
      aim: 0.25,
      ...postgresBound(pg, n, base.msgsPerSec),
      completionDelayMs: pg.completionDelayMs,
      gateDelayMs: pg.gateDelayMs,
      completionDelayMsAllRounds: postgresRuns.map((e) => e.completionDelayMs),
      lineageRows: pg.lineageRows,
      lineageWrites: pg.lineageWrites,
      lineageWritesPerHop: perHop(pg.lineageWrites),
      postgresCpuUsPerMsg: usPerMsg(pg.postgresCpuMs),
      lineageLost: [...postgresRuns, ...ackFirstRuns].reduce((sum, e) => sum + e.lineageLost, 0),
      ackFirstMsgsPerSec: ackFirst.msgsPerSec,
      ackFirstRatio: Math.round((ackFirst.msgsPerSec / base.msgsPerSec) * 1000) / 1000,
      ackFirstPostgresCpuMs: ackFirst.postgresCpuMs,
      ackFirstPostgresCpuUsPerMsg: usPerMsg(ackFirst.postgresCpuMs),
      ackFirstLineageWritesPerHop: perHop(ackFirst.lineageWrites),
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
    }),
  );
  const memory = best(memoryRuns);
  console.log(
    JSON.stringify({
      bench: "engine",
      n,
      rounds,
      provider: "embedded-memory",
      lineage: "memory",
      baselineMsgsPerSec: base.msgsPerSec,
      engineMsgsPerSec: memory.msgsPerSec,
      engineMs: memory.ms,
      engineCpuMs: memory.cpuMs,
      ratio: Math.round((memory.msgsPerSec / base.msgsPerSec) * 1000) / 1000,
      completionDelayMs: memory.completionDelayMs,
      lineageWrites: memory.lineageWrites,
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
    }),
  );
}

/**
 * What PostgreSQL's own CPU allows: the run's N over the CPU time PostgreSQL spent on its lineage,
 * the rate it could reach with a whole core to itself and nothing else to wait for, and that rate
 * against the bare provider's.
 */
/** Lineage writes per delivery of the pipeline (2N + 1 deliveries for N messages). */
function perHopOf(writes: number, n: number): number {
  return Math.round((writes / (2 * n + 1)) * 100) / 100;
}

function postgresBound(run: { postgresCpuMs?: number | undefined }, n: number, baselineMsgsPerSec: number) {
  if (run.postgresCpuMs === undefined || run.postgresCpuMs <= 0) return {};
  const msgsPerSec = Math.round(n / (run.postgresCpuMs / 1000));
  return {
    postgresCpuMs: run.postgresCpuMs,
    postgresBoundMsgsPerSec: msgsPerSec,
    postgresBoundRatio: Math.round((msgsPerSec / baselineMsgsPerSec) * 1000) / 1000,
  };
}
