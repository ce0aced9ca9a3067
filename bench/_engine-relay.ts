/**
 * The broker benches' `engine` mode (shared by `bench/rabbitmq.ts` and `bench/artemis.ts`): the same
 * relay as their raw and provider modes, expressed as a Factflow pipeline and run through
 * `@factflow/engine` over the provider, with lineage on the real PostgreSQL.
 *
 * Pipeline (one execution per measurement):
 *
 *     seed (split) ─▶ hop1 (passthrough) ─▶ hop2 (passthrough) ─▶ hop3 (passthrough) ─▶ sink (passthrough, ends the chain)
 *
 * `hop1..hop3` and `sink` mirror the raw relay's `q1 → q2 → q3 → sink` exactly (three relaying
 * consumers, one final consumer). The `seed` route stands in for the raw modes' injector: the init
 * message `{ items: [{ index: 0 }, …] }` is fanned out by `split` into N messages on `hop1.in`, at
 * most 256 publishes in flight (the raw injector keeps 100). Feeding N messages from outside the
 * engine was not an option: only messages the engine registered in lineage count towards its
 * completion gate.
 *
 * Timing: `msgsPerSec` is N / (first publish to `hop1.in` → the execution's `completed` event), the
 * window that matches the raw modes' first inject → last arrival, plus the engine's completion gate.
 * `endToEndMsgsPerSec` also counts what comes before the first publish (`service.create`: execution
 * row, subscribing the five routes, the seed's lineage rows). Hop latency is measured exactly as in
 * the other modes: a thin wrapper around the provider stamps `x-bench-sent` on every publish and
 * reads it when a delivery reaches `hop1..3` or `sink`.
 *
 * Lineage: one PostgreSQL database per bench run (`factflow_bench_<random>`, created through the
 * `postgres` maintenance database of `DATABASE_URL` and dropped by {@link EngineRelayMode.dispose}),
 * and `strictLineage: true` (the default): on a shared broker another process may consume, so each
 * hop's outbound row is committed before the publish.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { adapters } from "@factflow/adapters";
import { createEngine, type ExecutionEvent, loadPipelineConfig } from "@factflow/engine";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { LineageProtocol, MessageHandler, QueueProtocol } from "@factflow/protocols";
import { createFileStorage } from "@factflow/storage";
import { createScratchDatabase } from "./_scratch-database.js";
import { percentile } from "./_stats.js";

const SENT_HEADER = "x-bench-sent";
/** The queues whose deliveries count as hops, as in the raw relay (q1, q2, q3, sink). */
const HOP_QUEUES = ["hop1.in", "hop2.in", "hop3.in", "sink.in"] as const;

/** One measurement of one mode, as every relay mode reports it. */
export interface RelayMeasurement {
  readonly msgsPerSec: number;
  readonly p50: number;
  readonly p99: number;
  /** Mode-specific figures, reported as medians over the rounds. */
  readonly extra?: Record<string, number>;
}

/** A mode that runs a whole measurement itself (the engine seeds its own messages). */
export interface SelfTimedMode {
  readonly name: string;
  measure(n: number): Promise<RelayMeasurement>;
  /** Releases what the mode kept across rounds (the lineage database). Idempotent. */
  dispose(): Promise<void>;
}

/** How the engine mode builds and cleans up its provider. */
export interface EngineRelayTarget<P extends QueueProtocol> {
  /** A fresh, unconnected provider. */
  create(): P;
  /** Deletes what the execution left on the broker; `destinations` are the execution-scoped queues. */
  cleanup(provider: P, destinations: readonly string[]): Promise<void>;
}

export interface EngineRelayOptions {
  /** Deliveries each hop holds and handles at once (the other modes' prefetch and concurrency). */
  readonly prefetch: number;
  /** @default "engine+lineage" */
  readonly name?: string;
  /**
   * The engine's `strictLineage`. Only for diagnosis may it be false here (one process publishes
   * and consumes, so it stays sound): it shows what the durable commit before each hop costs.
   * @default true
   */
  readonly strictLineage?: boolean;
}

/** The relay pipeline as YAML, for `loadPipelineConfig`. */
export interface RelayPipelineOptions {
  readonly name: string;
  /** Concurrency and prefetch of every hop. */
  readonly perHop: number;
  /** `settings.max_handlers`: all routes of the execution together. */
  readonly maxHandlers: number;
  /** End in a `sink` route after `hop3` (the broker benches), or at `hop3` (the peer bench). */
  readonly sink: boolean;
  /** The adapter every hop runs, as a YAML flow mapping. @default "{ type: passthrough }" */
  readonly hopAdapter?: string;
}

/**
 * `seed` splits the input's `items` into `hop1.in`, then `hop1 → hop2 → hop3` (passthrough), and
 * optionally `sink`.
 */
export function relayPipelineYaml(options: RelayPipelineOptions): string {
  const { perHop } = options;
  const inbound = (queue: string) => `{ queue: ${queue}, concurrency: ${perHop}, prefetch: ${perHop} }`;
  const hop = (name: string, next: string | undefined) =>
    `  ${name}:
    inbound: ${inbound(`${name}.in`)}
    adapters: [${options.hopAdapter ?? "{ type: passthrough }"}]
${next === undefined ? "" : `    outbound: [${next}.in]\n`}`;
  return `
name: ${options.name}
init: { route: seed }
settings: { max_handlers: ${options.maxHandlers} }
routes:
  seed:
    inbound: { queue: seed.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [hop1.in]
${hop("hop1", "hop2")}${hop("hop2", "hop3")}${hop("hop3", options.sink ? "sink" : undefined)}${options.sink ? hop("sink", undefined) : ""}`;
}

function relayConfig(prefetch: number): string {
  // max_handlers caps all routes of an execution together: give each hop the same room as the raw relay.
  return relayPipelineYaml({ name: "bench-relay", perHop: prefetch, maxHandlers: prefetch * 5, sink: true });
}

interface Probe {
  firstHopPublish: number | undefined;
  /** When the last publish to `hop1.in` (the seeding) was confirmed. */
  lastSeedConfirmed: number;
  readonly hops: number[];
  readonly destinations: Set<string>;
}

/** Observes the provider the way the raw modes measure themselves; settlement is untouched. */
function probed(provider: QueueProtocol, probe: Probe): QueueProtocol {
  const isHop = (destination: string) => HOP_QUEUES.some((q) => destination.endsWith(`/${q}`));
  return {
    get name() {
      return provider.name;
    },
    get capabilities() {
      return provider.capabilities;
    },
    get admin() {
      return provider.admin;
    },
    connect: () => provider.connect(),
    close: () => provider.close(),
    counters: () => provider.counters(),
    publish(destination, message) {
      const seeding = destination.endsWith("/hop1.in");
      if (seeding && probe.firstHopPublish === undefined) probe.firstHopPublish = performance.now();
      const published = provider.publish(destination, {
        ...message,
        headers: { ...message.headers, [SENT_HEADER]: String(Date.now()) },
      });
      if (!seeding) return published;
      return published.then((receipt) => {
        probe.lastSeedConfirmed = performance.now();
        return receipt;
      });
    },
    subscribe(destination, handler, options) {
      probe.destinations.add(destination);
      if (!isHop(destination)) return provider.subscribe(destination, handler, options);
      const timed: MessageHandler = (delivery, signal) => {
        probe.hops.push(Date.now() - Number(delivery.message.headers[SENT_HEADER]));
        return handler(delivery, signal);
      };
      return provider.subscribe(destination, timed, options);
    },
  };
}

/**
 * Times `registerPending` — with `strictLineage` each hop awaits one before its publish — and
 * `flush`; everything else passes straight through to the store.
 */
function timedLineage(lineage: LineageProtocol, waits: { commit: number[] }): LineageProtocol {
  const timed = (method: "registerPending" | "flush") => {
    const call = (lineage[method] as (...a: unknown[]) => Promise<void>).bind(lineage);
    return async (...args: unknown[]) => {
      const started = performance.now();
      try {
        await call(...args);
      } finally {
        waits.commit.push(performance.now() - started);
      }
    };
  };
  const overrides = new Map<PropertyKey, unknown>([
    ["registerPending", timed("registerPending")],
    ["flush", timed("flush")],
  ]);
  return new Proxy(lineage, {
    get(target, property) {
      let value = overrides.get(property);
      if (value !== undefined || overrides.has(property)) return value;
      value = Reflect.get(target, property, target);
      // Bound to the store itself (its methods use private fields), once: the engine reads
      // `record` and `update` on every hop, and a fresh bound function per read would be the bench's
      // cost, not the engine's.
      if (typeof value !== "function") return value;
      const bound = value.bind(target);
      overrides.set(property, bound);
      return bound;
    },
  });
}

/**
 * Creates the run's lineage database and opens it; `drop` closes and removes it. With
 * `FACTFLOW_BENCH_LINEAGE=memory` (a diagnosis, like `FACTFLOW_BENCH_RELAXED_LINEAGE`) lineage stays
 * in the process instead: the same relay without PostgreSQL's share of the machine.
 */
async function createBenchDatabase(): Promise<{ db: LineageDatabase; drop(): Promise<void> }> {
  if (process.env.FACTFLOW_BENCH_LINEAGE === "memory") {
    const db = await openLineageDatabase({ memory: true });
    return { db, drop: () => db.close() };
  }
  const scratch = await createScratchDatabase();
  try {
    const db = await openLineageDatabase({ databaseUrl: scratch.url });
    return {
      db,
      async drop() {
        await db.close().catch(() => {});
        await scratch.drop();
      },
    };
  } catch (error) {
    await scratch.drop();
    throw error;
  }
}

/**
 * The engine mode over `target`'s provider. The lineage database is created on the first
 * measurement and kept for the run (each measurement is a new execution); `dispose` drops it.
 */
export function createEngineRelayMode<P extends QueueProtocol>(
  target: EngineRelayTarget<P>,
  options: EngineRelayOptions,
): SelfTimedMode {
  let database: Promise<Awaited<ReturnType<typeof createBenchDatabase>>> | undefined;
  return {
    name: options.name ?? "engine+lineage",
    async dispose() {
      const opened = database;
      database = undefined;
      if (opened !== undefined) await (await opened).drop();
    },
    async measure(n) {
      database ??= createBenchDatabase();
      const { db } = await database;
      const storageRoot = await mkdtemp(join(tmpdir(), "factflow-bench-relay-"));
      const provider = target.create();
      const probe: Probe = {
        firstHopPublish: undefined,
        lastSeedConfirmed: 0,
        hops: [],
        destinations: new Set(),
      };
      const waits = { commit: [] as number[] };
      await provider.connect();
      const engine = createEngine({
        queue: probed(provider, probe),
        lineage: timedLineage(db.lineage, waits),
        executions: db.executions,
        storage: createFileStorage({ root: storageRoot }),
        adapters,
        strictLineage: options.strictLineage ?? true,
      });
      try {
        const config = await loadPipelineConfig(relayConfig(options.prefetch), { registry: engine.registry });
        const before = db.lineage.counters();
        const started = performance.now();
        const record = await engine.service.create({
          config,
          input: { items: Array.from({ length: n }, (_, index) => ({ index })) },
        });
        let last: ExecutionEvent | undefined;
        for await (const event of engine.service.events(record.id)) last = event;
        const ended = performance.now();
        if (last?.type !== "completed") {
          throw new Error(
            `[factflow/bench] the engine relay ended "${last?.type}" instead of completed: ${JSON.stringify(last?.data)}`,
          );
        }
        const relayStart = probe.firstHopPublish ?? started;
        probe.hops.sort((a, b) => a - b);
        const commits = [...waits.commit].sort((a, b) => a - b);
        const after = db.lineage.counters();
        return {
          msgsPerSec: n / ((ended - relayStart) / 1000),
          p50: percentile(probe.hops, 50),
          p99: percentile(probe.hops, 99),
          extra: {
            endToEndMsgsPerSec: n / ((ended - started) / 1000),
            setupMs: relayStart - started,
            // How long the seed route took to publish all N (the raw modes' injection).
            seedMs: probe.lastSeedConfirmed - relayStart,
            relayMs: ended - relayStart,
            // Durable lineage commits awaited (one per hop with strict lineage) and their wait.
            lineageCommits: commits.length,
            lineageCommitP50Ms: percentile(commits, 50),
            lineageCommitP99Ms: percentile(commits, 99),
            completionDelayMs: Number(last.data.completionDelayMs ?? Number.NaN),
            gateDelayMs: Number(last.data.gateDelayMs ?? Number.NaN),
            // More hop deliveries than 4 × N means redeliveries (retries) happened.
            hopDeliveries: probe.hops.length,
            // Rows and updates committed during the measurement (about 5 per hop delivery).
            lineageWrites: after.written - before.written,
            lineageWritesPerHop: (after.written - before.written) / Math.max(1, probe.hops.length),
            lineageLost: after.lost - before.lost,
          },
        };
      } finally {
        await engine.shutdown({ cancel: true });
        await provider.close().catch(() => {});
        await target.cleanup(provider, [...probe.destinations]).catch(() => {});
        await rm(storageRoot, { recursive: true, force: true });
      }
    },
  };
}
