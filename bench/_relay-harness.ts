/**
 * The 3-hop relay harness shared by `bench/rabbitmq.ts` and `bench/artemis.ts`: the mode contract,
 * one timed relay of N messages, interleaved rounds, medians and the JSON report. Each broker bench
 * supplies only its modes (raw client, provider, engine) and how to remove its queues.
 */
import { randomUUID } from "node:crypto";
import type { RelayMeasurement, SelfTimedMode } from "./_engine-relay.js";
import { type BrokerMatcher, cpuPerMessage, processCpuSampler } from "./_process-cpu.js";
import { median, percentile } from "./_stats.js";

/** What a relay mode reports back to the harness. */
export interface RelaySink {
  /** Call once per message reaching the sink. */
  arrived(): void;
  /** Call with each hop's latency (publish of the hop → consumption by the next), in ms. */
  hop(ms: number): void;
}

/** A running relay: injects into the first queue, tears everything down. */
export interface RelayRun {
  inject(index: number): Promise<void>;
  close(): Promise<void>;
}

/** A way to run the relay. `queues` are four unique bare names: q1, q2, q3 and the sink. */
export interface RelayMode {
  readonly name: string;
  start(url: string, queues: readonly string[], sink: RelaySink): Promise<RelayRun>;
}

export type BenchMode = RelayMode | SelfTimedMode;

/** Each mode's aim, as a fraction of the raw client's msgs/s (issues 6 and 7). */
const AIMS: Record<string, number> = { provider: 0.8, "engine+lineage": 0.6 };
/** Publishes of the injector awaiting their confirm/receipt at once. */
const INJECT_WINDOW = 100;

/** Median of each mode-specific figure over the rounds. */
function medianExtras(list: readonly RelayMeasurement[]): Record<string, number> {
  const keys = new Set(list.flatMap((r) => Object.keys(r.extra ?? {})));
  const out: Record<string, number> = {};
  for (const key of keys) {
    const value = median(list.map((r) => r.extra?.[key] ?? Number.NaN));
    out[key] = Number(value.toFixed(value >= 100 ? 0 : 2));
  }
  return out;
}

/** Node, broker and PostgreSQL CPU of a round, per message (NaN without the CPU figures). */
function totalCpuUsPerMsg(r: RelayMeasurement): number {
  const e = r.extra ?? {};
  return (
    (e.nodeCpuUsPerMsg ?? Number.NaN) +
    (e.brokerCpuUsPerMsg ?? Number.NaN) +
    (e.postgresCpuUsPerMsg ?? Number.NaN)
  );
}

/**
 * `cpuUsPerMsg`: the three processes' CPU per message (median round), and `cpuRatioVsRaw`: the
 * baseline's over this mode's, the ratio the two would reach on a machine whose cores they saturate.
 */
function cpuFigures(list: readonly RelayMeasurement[], baselineCpu: number): Record<string, number> {
  const cpu = median(list.map(totalCpuUsPerMsg));
  if (!Number.isFinite(cpu)) return {};
  return { cpuUsPerMsg: Math.round(cpu), cpuRatioVsRaw: Number((baselineCpu / cpu).toFixed(3)) };
}

/** One relay of `n` messages through `mode`; `cleanup` removes the relay's queues afterwards. */
async function measure(
  mode: BenchMode,
  url: string,
  n: number,
  cleanup: (queues: readonly string[]) => Promise<void>,
): Promise<RelayMeasurement> {
  if ("measure" in mode) return mode.measure(n);
  const tag = randomUUID().slice(0, 8);
  const queues = ["q1", "q2", "q3", "sink"].map((q) => `bench-${tag}-${mode.name}-${q}`);
  const hops: number[] = [];
  let arrived = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const relay = await mode.start(url, queues, {
    arrived() {
      arrived += 1;
      if (arrived === n) done();
    },
    hop(ms) {
      hops.push(ms);
    },
  });
  const started = performance.now();
  try {
    let nextIndex = 0;
    const injector = async () => {
      while (nextIndex < n) await relay.inject(nextIndex++);
    };
    await Promise.all(Array.from({ length: Math.min(INJECT_WINDOW, n) }, injector));
    await all;
  } finally {
    await relay.close();
    await cleanup(queues);
  }
  const seconds = (performance.now() - started) / 1000;
  hops.sort((a, b) => a - b);
  return { msgsPerSec: n / seconds, p50: percentile(hops, 50), p99: percentile(hops, 99) };
}

export interface RelayBenchOptions {
  /** `rabbitmq` or `artemis`: names the JSON lines and the error messages. */
  readonly bench: string;
  readonly url: string;
  /** The raw-client baseline first, then the provider. */
  readonly relayModes: readonly RelayMode[];
  /** Builds the engine mode (`strictLineage: false` only for diagnosis). */
  readonly engineMode: (url: string, strictLineage?: boolean) => SelfTimedMode;
  /** Removes a finished relay's queues (a no-op where the mode's close() already did). */
  readonly cleanup?: (queues: readonly string[]) => Promise<void>;
  /** The broker's processes on this machine, for the CPU figures of each round. */
  readonly broker: BrokerMatcher;
}

/**
 * `run([N, rounds])`: N messages per relay (default 2000); every mode runs `rounds` times (default
 * 5), interleaved, so a noisy neighbour or a broker fsync stall hits every mode alike; the median
 * round of each mode is reported as one JSON line with its ratio to the baseline.
 */
export async function runRelayBench(args: readonly string[], options: RelayBenchOptions): Promise<void> {
  const { bench, url } = options;
  const cleanup = options.cleanup ?? (async () => {});
  const n = Number(args[0] ?? 2000);
  const rounds = Number(args[1] ?? 5);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] ${bench}: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] ${bench}: rounds must be a positive integer, got "${args[1]}"`);
  // FACTFLOW_BENCH_RELAXED_LINEAGE=1 adds the engine with strictLineage off, for diagnosis.
  const engines = [options.engineMode(url)];
  if (process.env.FACTFLOW_BENCH_RELAXED_LINEAGE === "1") engines.push(options.engineMode(url, false));
  const modes: BenchMode[] = [...options.relayModes, ...engines];
  const results = new Map<string, RelayMeasurement[]>();
  try {
    // A short warm-up so JIT, queue creation and the lineage database's creation do not count
    // against the first round.
    for (const mode of modes) await measure(mode, url, Math.min(200, n), cleanup);
    const sample = processCpuSampler(options.broker);
    for (let round = 0; round < rounds; round++) {
      for (const mode of modes) {
        const list = results.get(mode.name) ?? [];
        const before = sample?.();
        const measured = await measure(mode, url, n, cleanup);
        const after = sample?.();
        // CPU of the whole round (setup and teardown included) per message, process by process.
        const cpu = before === undefined || after === undefined ? {} : cpuPerMessage(before, after, n);
        list.push({ ...measured, extra: { ...measured.extra, ...cpu } });
        results.set(mode.name, list);
      }
    }
  } finally {
    for (const engine of engines) await engine.dispose();
  }
  const baselineName = (modes[0] as BenchMode).name;
  const baseline = median((results.get(baselineName) ?? []).map((r) => r.msgsPerSec));
  const baselineCpu = median((results.get(baselineName) ?? []).map(totalCpuUsPerMsg));
  for (const mode of modes) {
    const list = results.get(mode.name) ?? [];
    const rate = median(list.map((r) => r.msgsPerSec));
    const aim = AIMS[mode.name];
    console.log(
      JSON.stringify({
        bench,
        mode: mode.name,
        n,
        rounds,
        hops: 3,
        msgsPerSec: Math.round(rate),
        hopP50Ms: Number(median(list.map((r) => r.p50)).toFixed(2)),
        hopP99Ms: Number(median(list.map((r) => r.p99)).toFixed(2)),
        ratioVsRaw: Number((rate / baseline).toFixed(3)),
        ...(aim === undefined ? {} : { aimVsRaw: aim }),
        baseline: baselineName,
        roundsMsgsPerSec: list.map((r) => Math.round(r.msgsPerSec)),
        ...cpuFigures(list, baselineCpu),
        ...medianExtras(list),
      }),
    );
  }
}
