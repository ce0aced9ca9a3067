/**
 * `pnpm bench peer [N] [rounds] [modes]`: Factflow against a job queue a user might pick instead.
 *
 * - `bullmq`: BullMQ on the machine's Redis (`REDIS_URL`, default redis://127.0.0.1:6379), three
 *   workers relaying N jobs q1 → q2 → q3 (each worker adds the job to the next queue and completes;
 *   the third only counts). Jobs are added with `addBulk` in chunks of 1000, and removed on
 *   completion, as a throughput-minded BullMQ user would. Every queue gets a unique prefix
 *   (`factflow-bench-<random>`), obliterated afterwards.
 * - `engine` (once per lineage mode: `postgres`, `pglite`, `memory`): `@factflow/engine` on the
 *   embedded provider in memory mode, a `seed` route fanning the N items out to `hop1 → hop2 → hop3`
 *   (passthrough adapters, the last one ends the chain): three relaying routes like the three workers.
 *   Lineage as the server composes it for the embedded provider (`strictLineage` off, every hop
 *   recorded). Postgres lineage goes to a scratch database created and dropped by the run.
 *
 * Both sides use the same N (default 20 000) and the same concurrency per hop (16). Every mode runs
 * `rounds` times (default 3), interleaved, and the median round is kept. msgs/s is N over the time
 * from the first add (BullMQ) or `service.create` (engine) to the last job completed on q3 or the
 * execution's `completed` event, so the engine's figure includes its completion gate.
 *
 * Prints one JSON line per lineage mode: `{"bench":"peer","lineage":…,"msgsPerSec":…,
 * "bullmqMsgsPerSec":…,"ratioVsBullmq":…}` plus the goal for that mode and the rounds.
 * `modes` (comma-separated, e.g. `memory,postgres`) restricts the lineage modes.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { adapters } from "@factflow/adapters";
import { createEngine, type ExecutionEvent, loadPipelineConfig } from "@factflow/engine";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { ArtefactSidecar, StorageProtocol } from "@factflow/protocols";
import { type ConnectionOptions, Queue, Worker } from "bullmq";
import { relayPipelineYaml } from "./_engine-relay.js";
import { createScratchDatabase, type ScratchDatabase } from "./_scratch-database.js";
import { median } from "./_stats.js";

const CONCURRENCY = 16;
const LINEAGE_MODES = ["postgres", "pglite", "memory"] as const;
type LineageMode = (typeof LINEAGE_MODES)[number];
/** The goals, as multiples of BullMQ's rate. */
const GOALS: Record<LineageMode, number> = { postgres: 2, pglite: 1.5, memory: 4 };

/** The relay carries no artefacts; the engine still needs a StorageProtocol. */
const noStorage: StorageProtocol = {
  put: async (key) => ({ key, contentType: "", size: 0, sha256: "", createdAt: "" }) as ArtefactSidecar,
  get: async () => undefined,
  head: async () => undefined,
  list: async () => [],
  delete: async () => false,
  describe: () => "none",
};

function redisConnection(): ConnectionOptions {
  const url = new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.password === "" ? {} : { password: decodeURIComponent(url.password) }),
    maxRetriesPerRequest: null,
  };
}

export interface Round {
  msgsPerSec: number;
  ms: number;
  cpuMs: number;
  extra?: Record<string, number>;
}

/**
 * A 100 ms timer running during a measurement: how late each firing was (event-loop stalls, e.g. a
 * database on the pipeline's thread). `stop` returns the worst and the 99th percentile, in ms.
 */
function watchTimer(): { stop(): { max: number; p99: number } } {
  const lateness: number[] = [];
  let due = performance.now() + 100;
  let handle: NodeJS.Timeout;
  const arm = () => {
    handle = setTimeout(() => {
      const now = performance.now();
      lateness.push(Math.max(0, now - due));
      due = now + 100;
      arm();
    }, 100);
  };
  arm();
  return {
    stop() {
      clearTimeout(handle);
      const sorted = lateness.sort((a, b) => a - b);
      return {
        max: sorted[sorted.length - 1] ?? 0,
        p99: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
      };
    },
  };
}

function cpuMsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return Math.round((used.user + used.system) / 1000);
}

/** N jobs through three BullMQ workers; every key it made is removed before it returns. */
async function bullmqRound(n: number): Promise<Round> {
  const connection = redisConnection();
  const prefix = `factflow-bench-${randomBytes(4).toString("hex")}`;
  const names = ["q1", "q2", "q3"];
  const queues = names.map((name) => new Queue(name, { connection, prefix }));
  const jobOptions = { removeOnComplete: true, removeOnFail: true };
  let arrived = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const workers = names.map(
    (name, i) =>
      new Worker(
        name,
        async (job) => {
          const next = queues[i + 1];
          if (next !== undefined) await next.add("relay", job.data, jobOptions);
          else if (++arrived === n) done();
        },
        { connection, prefix, concurrency: CONCURRENCY, autorun: false },
      ),
  );
  try {
    await Promise.all(queues.map((q) => q.waitUntilReady()));
    for (const worker of workers) void worker.run();
    await Promise.all(workers.map((w) => w.waitUntilReady()));
    const started = performance.now();
    const cpu = process.cpuUsage();
    for (let from = 0; from < n; from += 1000) {
      const chunk = Array.from({ length: Math.min(1000, n - from) }, (_, k) => ({
        name: "relay",
        data: { index: from + k },
        opts: jobOptions,
      }));
      await (queues[0] as Queue).addBulk(chunk);
    }
    await finished;
    const ms = performance.now() - started;
    return { msgsPerSec: n / (ms / 1000), ms, cpuMs: cpuMsSince(cpu) };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    for (const queue of queues) {
      await queue.obliterate({ force: true }).catch(() => {});
      await queue.close();
    }
  }
}

function relayConfig(): string {
  return relayPipelineYaml({
    name: "bench-peer",
    perHop: CONCURRENCY,
    maxHandlers: CONCURRENCY * 4,
    sink: false,
  });
}

/** The lineage databases of the run: opened on first use, closed (and removed) at the end. */
class LineageDatabases {
  readonly #open = new Map<LineageMode, LineageDatabase>();
  #scratch: ScratchDatabase | undefined;
  #pgliteDir: string | undefined;

  async get(mode: LineageMode): Promise<LineageDatabase> {
    const opened = this.#open.get(mode);
    if (opened !== undefined) return opened;
    let db: LineageDatabase;
    if (mode === "memory") db = await openLineageDatabase({ memory: true });
    else if (mode === "pglite") {
      this.#pgliteDir = await mkdtemp(join(tmpdir(), "factflow-bench-peer-"));
      db = await openLineageDatabase({ dataDir: this.#pgliteDir });
    } else {
      this.#scratch = await createScratchDatabase();
      db = await openLineageDatabase({ databaseUrl: this.#scratch.url });
    }
    this.#open.set(mode, db);
    return db;
  }

  async closeAll(): Promise<void> {
    for (const db of this.#open.values()) await db.close().catch(() => {});
    this.#open.clear();
    await this.#scratch?.drop();
    if (this.#pgliteDir !== undefined) await rm(this.#pgliteDir, { recursive: true, force: true });
  }
}

export async function engineRound(
  n: number,
  db: Pick<LineageDatabase, "lineage" | "executions">,
): Promise<Round> {
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: db.executions,
    storage: noStorage,
    adapters,
    strictLineage: false,
  });
  try {
    const config = await loadPipelineConfig(relayConfig(), { registry: engine.registry });
    const before = db.lineage.counters();
    const timer = watchTimer();
    const loop = performance.eventLoopUtilization();
    const started = performance.now();
    const cpu = process.cpuUsage();
    const record = await engine.service.create({
      config,
      input: { items: Array.from({ length: n }, (_, index) => ({ index })) },
    });
    let last: ExecutionEvent | undefined;
    for await (const event of engine.service.events(record.id)) last = event;
    const ms = performance.now() - started;
    const cpuMs = cpuMsSince(cpu);
    const late = timer.stop();
    // Time the main thread was busy (process CPU also counts PGlite's worker thread).
    const busyMs = performance.eventLoopUtilization(loop).active;
    if (last?.type !== "completed")
      throw new Error(
        `[factflow/bench] peer: the engine run ended "${last?.type}": ${JSON.stringify(last?.data)}`,
      );
    const after = db.lineage.counters();
    return {
      msgsPerSec: n / (ms / 1000),
      ms,
      cpuMs,
      extra: {
        completionDelayMs: Number(last.data.completionDelayMs ?? Number.NaN),
        // Wall time the main thread's event loop was not idle (on a crowded machine this includes
        // time spent waiting for a core, so it is an upper bound of its CPU time).
        mainThreadActiveMs: Math.round(busyMs),
        // How late a 100 ms timer fired during the run (goal: within 50 ms).
        timerLateMaxMs: Math.round(late.max),
        timerLateP99Ms: Math.round(late.p99),
        lineageWrites: after.written - before.written,
        lineageLost: after.lost - before.lost,
      },
    };
  } finally {
    await engine.shutdown({ cancel: true });
    await queue.close();
  }
}

function medianRound(rounds: readonly Round[]): Round {
  const rate = median(rounds.map((r) => r.msgsPerSec));
  return rounds.find((r) => r.msgsPerSec === rate) as Round;
}

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 20_000);
  const rounds = Number(args[1] ?? 3);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] peer: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] peer: rounds must be a positive integer, got "${args[1]}"`);
  const modes = (args[2]?.split(",") ?? [...LINEAGE_MODES]) as LineageMode[];
  for (const mode of modes)
    if (!LINEAGE_MODES.includes(mode))
      throw new Error(
        `[factflow/bench] peer: unknown lineage mode "${mode}" (use ${LINEAGE_MODES.join(", ")})`,
      );
  const databases = new LineageDatabases();
  const bull: Round[] = [];
  const engines = new Map<LineageMode, Round[]>(modes.map((m) => [m, []]));
  try {
    // Warm-up: JIT, Redis scripts, database creation.
    await bullmqRound(Math.min(n, 1000)).catch((error: unknown) => {
      throw new Error(
        `[factflow/bench] peer: BullMQ could not run on Redis (${process.env.REDIS_URL ?? "redis://127.0.0.1:6379"}): ${(error as Error).message}. Start Redis (scripts/services/local.sh) or set REDIS_URL.`,
      );
    });
    for (const mode of modes) await engineRound(Math.min(n, 1000), await databases.get(mode));
    for (let round = 0; round < rounds; round++) {
      bull.push(await bullmqRound(n));
      for (const mode of modes) engines.get(mode)?.push(await engineRound(n, await databases.get(mode)));
    }
  } finally {
    await databases.closeAll();
  }
  const bullmq = medianRound(bull);
  for (const mode of modes) {
    const list = engines.get(mode) ?? [];
    const eng = medianRound(list);
    console.log(
      JSON.stringify({
        bench: "peer",
        lineage: mode,
        n,
        rounds,
        concurrencyPerHop: CONCURRENCY,
        hops: 3,
        provider: "embedded-memory",
        msgsPerSec: Math.round(eng.msgsPerSec),
        bullmqMsgsPerSec: Math.round(bullmq.msgsPerSec),
        ratioVsBullmq: Number((eng.msgsPerSec / bullmq.msgsPerSec).toFixed(3)),
        goalVsBullmq: GOALS[mode],
        engineCpuMs: eng.cpuMs,
        bullmqCpuMs: bullmq.cpuMs,
        // Engine CPU per hop in µs (lineage included when it runs on this thread).
        engineCpuUsPerHop: Math.round((eng.cpuMs * 1000) / (n * 3)),
        roundsMsgsPerSec: list.map((r) => Math.round(r.msgsPerSec)),
        bullmqRoundsMsgsPerSec: bull.map((r) => Math.round(r.msgsPerSec)),
        ...eng.extra,
        loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      }),
    );
  }
}
