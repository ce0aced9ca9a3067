/**
 * `pnpm bench peer [N] [rounds] [modes]`: Factflow against a job queue a user might pick instead.
 *
 * - `bullmq`: BullMQ on the machine's Redis (`REDIS_URL`, default redis://127.0.0.1:6379), three
 *   workers relaying N jobs q1 → q2 → q3 (each worker adds the job to the next queue and completes;
 *   the third only counts), set up for throughput as BullMQ's docs advise: jobs added with `addBulk`
 *   in chunks of 1000 and removed on completion and failure (`removeOnComplete`/`removeOnFail`), the
 *   queues sharing one ioredis connection and each worker its own blocking one, and the settings of
 *   {@link BULLMQ_BEST}, the fastest of {@link BULLMQ_VARIANTS} (`pnpm bench peer N rounds
 *   bullmq-settings [names]` measures them, or the named ones beside `docs`, interleaved, one
 *   line each). Every queue gets a unique prefix
 *   (`factflow-bench-<random>`), obliterated afterwards.
 * - engine modes `<queue>:<lineage>`: `@factflow/engine` on the embedded provider in `memory` mode or
 *   in `file` mode (the default setup: a journal in a temporary directory, fsync'd in group commits),
 *   with lineage in `postgres` (a scratch database created and dropped by the run), `pglite` (a
 *   temporary data dir) or `memory`. A `seed` route fans the N items out to `hop1 → hop2 → hop3`
 *   (passthrough adapters, the last one ends the chain): three relaying routes like the three
 *   workers. Lineage as the server composes it for the embedded provider (`strictLineage` off, every
 *   hop recorded).
 * - `user-adapter`: `memory:postgres` with every hop running a user's adapter (an
 *   `AdapterDefinition` registered through `createEngine`'s `adapters`, as users write them) that
 *   reads the `x-correlation-id` header and returns a new body.
 *
 * Both sides use the same N (default 20 000); the engine runs 16 deliveries per hop at once. Every
 * mode runs `rounds` times (default 3), interleaved, and the median round is kept. msgs/s is N over
 * the time from the first add (BullMQ) or `service.create` (engine) to the last job completed on q3
 * or the execution's `completed` event, so the engine's figure includes its completion gate.
 *
 * Prints one JSON line per engine mode: `{"bench":"peer","queue":…,"lineage":…,"adapter":…,
 * "msgsPerSec":…,"bullmqMsgsPerSec":…,"ratioVsBullmq":…}` plus the goal for that mode and the rounds.
 * `modes` (comma-separated) restricts the modes; a bare lineage name (`memory`, `postgres`, `pglite`)
 * means the memory queue.
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
import type { AdapterDefinition, ArtefactSidecar, JsonObject, StorageProtocol } from "@factflow/protocols";
import { type ConnectionOptions, Queue, Worker, type WorkerOptions } from "bullmq";
import { Redis, type RedisOptions } from "ioredis";
import { relayPipelineYaml } from "./_engine-relay.js";
import { createScratchDatabase, type ScratchDatabase } from "./_scratch-database.js";
import { median } from "./_stats.js";

/** Jobs each BullMQ worker runs at once in the set-up its docs describe. */
const DOCS_CONCURRENCY = 16;
const LINEAGE_MODES = ["postgres", "pglite", "memory"] as const;
type LineageMode = (typeof LINEAGE_MODES)[number];
const QUEUE_MODES = ["memory", "file"] as const;
type QueueMode = (typeof QUEUE_MODES)[number];

interface EngineMode {
  readonly name: string;
  readonly queue: QueueMode;
  readonly lineage: LineageMode;
  readonly adapter: "passthrough" | "user";
  /** The goal, as a multiple of BullMQ's rate. */
  readonly goal: number;
}

const ENGINE_MODES: readonly EngineMode[] = [
  { name: "memory:postgres", queue: "memory", lineage: "postgres", adapter: "passthrough", goal: 2 },
  { name: "memory:pglite", queue: "memory", lineage: "pglite", adapter: "passthrough", goal: 1.5 },
  { name: "memory:memory", queue: "memory", lineage: "memory", adapter: "passthrough", goal: 4 },
  { name: "file:pglite", queue: "file", lineage: "pglite", adapter: "passthrough", goal: 2 },
  { name: "file:postgres", queue: "file", lineage: "postgres", adapter: "passthrough", goal: 2.5 },
  { name: "user-adapter", queue: "memory", lineage: "postgres", adapter: "user", goal: 4 },
];

/**
 * A hop as a user writes one: reads a header of the delivery and returns a new body (the item's
 * index, the hop's name from its config, the correlation id from the header).
 */
const stampHop: AdapterDefinition = {
  type: "stamp_hop",
  description: "Returns a new body: the item's index, this hop's name and the delivery's correlation id",
  validateConfig: (config) => (typeof config.hop === "string" ? [] : ["hop: must be a string"]),
  create(config) {
    const hop = String(config.hop);
    return {
      type: "stamp_hop",
      process(ctx) {
        const body = ctx.message as JsonObject;
        return {
          data: {
            index: body.index ?? null,
            hop,
            correlation: ctx.envelope.headers["x-correlation-id"] ?? null,
          },
        };
      },
    };
  },
};

/** The relay carries no artefacts; the engine still needs a StorageProtocol. */
const noStorage: StorageProtocol = {
  put: async (key) => ({ key, contentType: "", size: 0, sha256: "", createdAt: "" }) as ArtefactSidecar,
  get: async () => undefined,
  head: async () => undefined,
  list: async () => [],
  delete: async () => false,
  describe: () => "none",
};

function redisOptions(): RedisOptions {
  const url = new URL(process.env.REDIS_URL ?? "redis://127.0.0.1:6379");
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    ...(url.password === "" ? {} : { password: decodeURIComponent(url.password) }),
    maxRetriesPerRequest: null,
  };
}

/** How the BullMQ side is set up; {@link BULLMQ_VARIANTS} lists what was tried. */
interface BullSettings {
  readonly name: string;
  /** Jobs each worker runs at once. */
  readonly concurrency: number;
  /** `skipStalledCheck` and `skipLockRenewal` (no stalled-job sweep, no lock-renewal timer). */
  readonly skipChecks: boolean;
  /** The three queues (the producers) share one ioredis connection instead of one each. */
  readonly sharedConnection: boolean;
  /** ioredis `enableAutoPipelining` on the producers' connection: commands of a tick in one write. */
  readonly autoPipelining: boolean;
}

const BULLMQ_DOCS: BullSettings = {
  name: "docs",
  concurrency: DOCS_CONCURRENCY,
  skipChecks: false,
  sharedConnection: true,
  autoPipelining: false,
};

/** The settings tried (`bullmq-settings` mode), each against the docs' set-up. */
export const BULLMQ_VARIANTS: readonly BullSettings[] = [
  { ...BULLMQ_DOCS, sharedConnection: false, name: "connection-per-queue" },
  BULLMQ_DOCS,
  { ...BULLMQ_DOCS, skipChecks: true, name: "skip-checks" },
  { ...BULLMQ_DOCS, autoPipelining: true, name: "auto-pipelining" },
  { ...BULLMQ_DOCS, concurrency: 64, name: "concurrency-64" },
  { ...BULLMQ_DOCS, concurrency: 256, name: "concurrency-256" },
  { ...BULLMQ_DOCS, concurrency: 256, skipChecks: true, name: "concurrency-256-skip-checks" },
];

/** The fastest of {@link BULLMQ_VARIANTS}, used against the engine. */
const BULLMQ_BEST: BullSettings =
  BULLMQ_VARIANTS.find((v) => v.name === "concurrency-256-skip-checks") ?? BULLMQ_DOCS;

/**
 * Messages each engine route handles at once, per queue mode: the faster of 16 and 256 (BullMQ's
 * kept concurrency) in interleaved runs (docs/performance.md). The file queue's fsync covers every
 * record written since the last one, so more work in flight means fewer fsyncs per message; the
 * memory queue has none and pays a little for the larger number. `FACTFLOW_BENCH_PEER_CONCURRENCY`
 * sets one number for every mode.
 */
function concurrencyOf(queue: QueueMode): number {
  const set = process.env.FACTFLOW_BENCH_PEER_CONCURRENCY;
  if (set !== undefined) return Number(set);
  return queue === "file" ? BULLMQ_BEST.concurrency : DOCS_CONCURRENCY;
}

export interface Round {
  msgsPerSec: number;
  ms: number;
  cpuMs: number;
  extra?: Record<string, number>;
}

/** `FACTFLOW_BENCH_TRACE_LATE_MS`: print every firing later than this to stderr (see bench/_late-stacks.ts). */
const traceLateMs =
  process.env.FACTFLOW_BENCH_TRACE_LATE_MS === undefined
    ? undefined
    : Number(process.env.FACTFLOW_BENCH_TRACE_LATE_MS);

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
      if (traceLateMs !== undefined && now - due > traceLateMs) {
        // The monotonic clock of a `--cpu-prof` profile's timestamps, so bench/_late-stacks.ts can
        // find what ran meanwhile.
        const atUs = Number(process.hrtime.bigint() / 1000n);
        process.stderr.write(`late ${JSON.stringify({ lateMs: Math.round(now - due), atUs })}\n`);
      }
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
async function bullmqRound(n: number, settings: BullSettings = BULLMQ_BEST): Promise<Round> {
  const options = redisOptions();
  const producer = settings.sharedConnection
    ? new Redis({ ...options, enableAutoPipelining: settings.autoPipelining })
    : undefined;
  const connection = (): ConnectionOptions =>
    producer ?? { ...options, enableAutoPipelining: settings.autoPipelining };
  const prefix = `factflow-bench-${randomBytes(4).toString("hex")}`;
  const names = ["q1", "q2", "q3"];
  const queues = names.map((name) => new Queue(name, { connection: connection(), prefix }));
  const jobOptions = { removeOnComplete: true, removeOnFail: true };
  const workerOptions: WorkerOptions = {
    connection: options,
    prefix,
    concurrency: settings.concurrency,
    autorun: false,
    ...(settings.skipChecks ? { skipStalledCheck: true, skipLockRenewal: true } : {}),
  };
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
        workerOptions,
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
    producer?.disconnect();
  }
}

function relayConfig(adapter: EngineMode["adapter"], concurrency: number): string {
  return relayPipelineYaml({
    name: "bench-peer",
    perHop: concurrency,
    maxHandlers: concurrency * 4,
    sink: false,
    ...(adapter === "user" ? { hopAdapter: "{ type: stamp_hop, config: { hop: relay } }" } : {}),
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
  mode: Pick<EngineMode, "queue" | "adapter"> & { concurrency?: number } = {
    queue: "memory",
    adapter: "passthrough",
  },
): Promise<Round> {
  const journal =
    mode.queue === "file" ? await mkdtemp(join(tmpdir(), "factflow-bench-peer-queue-")) : undefined;
  // The seed's input carries all N items in one message (about 17 bytes each): room for 500 000.
  const maxMessageBytes = 16 * 2 ** 20;
  const queue = createEmbeddedProvider(
    journal === undefined
      ? { mode: "memory", maxMessageBytes }
      : { mode: "file", dataDir: journal, maxMessageBytes },
  );
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: db.executions,
    storage: noStorage,
    adapters: mode.adapter === "user" ? [...adapters, stampHop] : adapters,
    strictLineage: false,
  });
  try {
    const concurrency = mode.concurrency ?? concurrencyOf(mode.queue);
    const config = await loadPipelineConfig(relayConfig(mode.adapter, concurrency), {
      registry: engine.registry,
    });
    const before = db.lineage.counters();
    const timer = watchTimer();
    // The process's resident memory, PGlite's worker thread included, sampled every 100 ms.
    let peakRss = process.memoryUsage.rss();
    const rssSampler = setInterval(() => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    }, 100).unref();
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
    clearInterval(rssSampler);
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
        // Per delivery: the seed's one and three per item.
        lineageWritesPerHop: Number(((after.written - before.written) / (3 * n + 1)).toFixed(2)),
        lineageLost: after.lost - before.lost,
        peakRssMb: Math.round(peakRss / 2 ** 20),
      },
    };
  } finally {
    await engine.shutdown({ cancel: true });
    await queue.close();
    if (journal !== undefined) await rm(journal, { recursive: true, force: true });
  }
}

function medianRound(rounds: readonly Round[]): Round {
  const rate = median(rounds.map((r) => r.msgsPerSec));
  return rounds.find((r) => r.msgsPerSec === rate) as Round;
}

function parseModes(arg: string | undefined): EngineMode[] {
  if (arg === undefined) return [...ENGINE_MODES];
  return arg.split(",").map((name) => {
    const full = (LINEAGE_MODES as readonly string[]).includes(name) ? `memory:${name}` : name;
    const mode = ENGINE_MODES.find((m) => m.name === full);
    if (mode === undefined)
      throw new Error(
        `[factflow/bench] peer: unknown mode "${name}" (use ${ENGINE_MODES.map((m) => m.name).join(", ")}, or bullmq-settings)`,
      );
    return mode;
  });
}

function rates(rounds: readonly Round[]): number[] {
  return rounds.map((r) => Math.round(r.msgsPerSec));
}

/** `bullmq-settings`: every variant of {@link BULLMQ_VARIANTS}, interleaved, one line each. */
async function compareBullmqSettings(n: number, rounds: number, names: string | undefined): Promise<void> {
  const variants =
    names === undefined
      ? BULLMQ_VARIANTS
      : BULLMQ_VARIANTS.filter((v) => v.name === BULLMQ_DOCS.name || names.split(",").includes(v.name));
  await bullmqRound(Math.min(n, 1000));
  const results = new Map<string, Round[]>(variants.map((v) => [v.name, []]));
  for (let round = 0; round < rounds; round++)
    for (const variant of variants) results.get(variant.name)?.push(await bullmqRound(n, variant));
  const docs = medianRound(results.get(BULLMQ_DOCS.name) ?? []);
  for (const variant of variants) {
    const list = results.get(variant.name) ?? [];
    const kept = medianRound(list);
    console.log(
      JSON.stringify({
        bench: "peer",
        bullmqSettings: variant,
        n,
        rounds,
        msgsPerSec: Math.round(kept.msgsPerSec),
        vsDocs: Number((kept.msgsPerSec / docs.msgsPerSec).toFixed(3)),
        cpuMs: kept.cpuMs,
        roundsMsgsPerSec: rates(list),
        kept: variant.name === BULLMQ_BEST.name,
        loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      }),
    );
  }
}

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 20_000);
  const rounds = Number(args[1] ?? 3);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] peer: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] peer: rounds must be a positive integer, got "${args[1]}"`);
  if (args[2] === "bullmq-settings") return compareBullmqSettings(n, rounds, args[3]);
  const modes = parseModes(args[2]);
  const databases = new LineageDatabases();
  const bull: Round[] = [];
  const engines = new Map<string, Round[]>(modes.map((m) => [m.name, []]));
  try {
    // Warm-up: JIT, Redis scripts, database creation.
    await bullmqRound(Math.min(n, 1000)).catch((error: unknown) => {
      throw new Error(
        `[factflow/bench] peer: BullMQ could not run on Redis (${process.env.REDIS_URL ?? "redis://127.0.0.1:6379"}): ${(error as Error).message}. Start Redis (scripts/services/local.sh) or set REDIS_URL.`,
      );
    });
    for (const mode of modes) await engineRound(Math.min(n, 1000), await databases.get(mode.lineage), mode);
    for (let round = 0; round < rounds; round++) {
      bull.push(await bullmqRound(n));
      for (const mode of modes)
        engines.get(mode.name)?.push(await engineRound(n, await databases.get(mode.lineage), mode));
    }
  } finally {
    await databases.closeAll();
  }
  const bullmq = medianRound(bull);
  for (const mode of modes) {
    const list = engines.get(mode.name) ?? [];
    const eng = medianRound(list);
    console.log(
      JSON.stringify({
        bench: "peer",
        queue: mode.queue,
        lineage: mode.lineage,
        adapter: mode.adapter,
        n,
        rounds,
        concurrencyPerHop: concurrencyOf(mode.queue),
        hops: 3,
        provider: `embedded-${mode.queue}`,
        msgsPerSec: Math.round(eng.msgsPerSec),
        bullmqMsgsPerSec: Math.round(bullmq.msgsPerSec),
        ratioVsBullmq: Number((eng.msgsPerSec / bullmq.msgsPerSec).toFixed(3)),
        goalVsBullmq: mode.goal,
        bullmqSettings: BULLMQ_BEST.name,
        bullmqConcurrency: BULLMQ_BEST.concurrency,
        engineCpuMs: eng.cpuMs,
        bullmqCpuMs: bullmq.cpuMs,
        // Engine CPU per hop in µs (lineage included when it runs on this thread).
        engineCpuUsPerHop: Math.round((eng.cpuMs * 1000) / (n * 3)),
        roundsMsgsPerSec: rates(list),
        bullmqRoundsMsgsPerSec: rates(bull),
        ...eng.extra,
        loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      }),
    );
  }
}
