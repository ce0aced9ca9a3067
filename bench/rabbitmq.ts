/**
 * `pnpm bench rabbitmq [N]`: a 3-hop relay (q1 → q2 → q3 → sink) of N messages through RabbitMQ.
 *
 * Modes, all in one run against the same broker, with the same durability (durable queues,
 * persistent messages, publisher confirms, manual acks after the next hop is confirmed):
 * - `raw-amqplib`: hand-written amqplib consume → publish → ack code, the baseline;
 * - `provider`: the same relay through `@factflow/infra-rabbitmq` handlers (engine and lineage off);
 * - `engine+lineage`: the same relay as a Factflow pipeline run by `@factflow/engine` over the
 *   provider, lineage on PostgreSQL with `strictLineage` (see `bench/_engine-relay.ts` for how it is
 *   seeded and timed);
 * - further modes plug in through {@link RELAY_MODES}.
 *
 * Prints one JSON line per mode at the end: msgs/s, p50/p99 hop latency, ratio to the baseline.
 */
import { randomUUID } from "node:crypto";
import { createRabbitMqProvider, type RabbitMqProvider } from "@factflow/infra-rabbitmq";
import type { HandlerResult } from "@factflow/protocols";
import amqp, { type ConfirmChannel, type ConsumeMessage } from "amqplib";
import { createEngineRelayMode, type RelayMeasurement, type SelfTimedMode } from "./_engine-relay.js";

const URL_DEFAULT = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const SENT_HEADER = "x-bench-sent";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;
/** Publishes of the injector awaiting their confirm at once. */
const INJECT_WINDOW = 100;

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

function confirmOf(
  channel: ConfirmChannel,
  queue: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<void> {
  return new Promise((resolve, reject) => {
    channel.sendToQueue(queue, body, { persistent: true, contentType: "application/json", headers }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
}

/** The baseline: plain amqplib, one channel per hop consumer, one confirm channel for publishing. */
export const rawAmqplibMode: RelayMode = {
  name: "raw-amqplib",
  async start(url, queues, sink) {
    const connection = await amqp.connect(url);
    const publisher = await connection.createConfirmChannel();
    const setup = await connection.createChannel();
    for (const q of queues) await setup.assertQueue(q, { durable: true });
    await setup.close();
    for (let i = 0; i < queues.length; i++) {
      const channel = await connection.createChannel();
      await channel.prefetch(PREFETCH);
      const next = queues[i + 1];
      await channel.consume(queues[i]!, (message: ConsumeMessage | null) => {
        if (message === null) return;
        const sent = Number(message.properties.headers?.[SENT_HEADER]);
        sink.hop(Date.now() - sent);
        if (next === undefined) {
          sink.arrived();
          channel.ack(message);
          return;
        }
        confirmOf(publisher, next, message.content, { [SENT_HEADER]: String(Date.now()) }).then(
          () => channel.ack(message),
          () => channel.nack(message, false, true),
        );
      });
    }
    return {
      inject: (index) =>
        confirmOf(publisher, queues[0]!, Buffer.from(JSON.stringify({ index })), {
          [SENT_HEADER]: String(Date.now()),
        }),
      async close() {
        const cleanup = await connection.createChannel();
        for (const q of queues) await cleanup.deleteQueue(q).catch(() => {});
        await connection.close();
      },
    };
  },
};

/** The relay through Factflow's provider: each hop is a subscription whose handler publishes onward. */
export const providerMode: RelayMode = {
  name: "provider",
  async start(url, queues, sink) {
    const provider = createRabbitMqProvider({ url });
    await provider.connect();
    const destinations = queues.map((q) => `/queue/${q}`);
    for (let i = 0; i < destinations.length; i++) {
      const next = destinations[i + 1];
      await provider.subscribe(
        destinations[i]!,
        async (delivery): Promise<HandlerResult> => {
          sink.hop(Date.now() - Number(delivery.message.headers[SENT_HEADER]));
          if (next === undefined) {
            sink.arrived();
            return "ACKNOWLEDGED";
          }
          await provider.publish(next, {
            body: delivery.message.body,
            headers: { [SENT_HEADER]: String(Date.now()) },
          });
          return "ACKNOWLEDGED";
        },
        { subscription: `hop-${i}`, prefetch: PREFETCH, concurrency: PREFETCH },
      );
    }
    return {
      inject: (index) =>
        provider
          .publish(destinations[0]!, { body: { index }, headers: { [SENT_HEADER]: String(Date.now()) } })
          .then(() => {}),
      async close() {
        await provider.close();
        await deleteDeclaredQueues(url, provider);
      },
    };
  },
};

/** Deletes the queues a (closed) provider declared, on a fresh connection. */
async function deleteDeclaredQueues(url: string, provider: RabbitMqProvider): Promise<void> {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  for (const q of provider.declaredNames().queues) await channel.deleteQueue(q).catch(() => {});
  await connection.close();
}

/**
 * The relay as a Factflow pipeline through the engine over the provider, lineage on PostgreSQL.
 * `strictLineage: false` is a diagnosis only (sound here because one process publishes and
 * consumes): it shows what the durable commit before each hop costs.
 */
function engineMode(url: string, strictLineage = true): SelfTimedMode {
  return createEngineRelayMode(
    {
      create: () => createRabbitMqProvider({ url }),
      cleanup: (provider) => deleteDeclaredQueues(url, provider),
    },
    { prefetch: PREFETCH, strictLineage, ...(strictLineage ? {} : { name: "engine+lineage-relaxed" }) },
  );
}

/** Each mode's aim, as a fraction of the baseline's msgs/s (issue 6). */
const AIMS: Record<string, number> = { provider: 0.8, "engine+lineage": 0.6 };

/** Modes in run order; the first is the baseline every ratio is computed against. */
export const RELAY_MODES: RelayMode[] = [rawAmqplibMode, providerMode];

type BenchMode = RelayMode | SelfTimedMode;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function measure(mode: BenchMode, url: string, n: number): Promise<RelayMeasurement> {
  if ("measure" in mode) return mode.measure(n);
  const tag = randomUUID().slice(0, 8);
  const queues = ["q1", "q2", "q3", "sink"].map((q) => `bench-${tag}-${mode.name}-${q}`);
  const hops: number[] = [];
  let arrived = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const run = await mode.start(url, queues, {
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
      while (nextIndex < n) await run.inject(nextIndex++);
    };
    await Promise.all(Array.from({ length: Math.min(INJECT_WINDOW, n) }, injector));
    await all;
  } finally {
    await run.close();
  }
  const seconds = (performance.now() - started) / 1000;
  hops.sort((a, b) => a - b);
  return { msgsPerSec: n / seconds, p50: percentile(hops, 50), p99: percentile(hops, 99) };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

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

/**
 * `run([N, rounds])`: N messages per relay (default 2000); every mode runs `rounds` times
 * (default 5), interleaved, so a noisy neighbour or a broker fsync stall hits every mode alike; the
 * median round of each mode is reported.
 */
export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 2000);
  const rounds = Number(args[1] ?? 5);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] rabbitmq: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] rabbitmq: rounds must be a positive integer, got "${args[1]}"`);
  const url = URL_DEFAULT;
  // FACTFLOW_BENCH_RELAXED_LINEAGE=1 adds the engine with strictLineage off, for diagnosis.
  const engines = [engineMode(url)];
  if (process.env.FACTFLOW_BENCH_RELAXED_LINEAGE === "1") engines.push(engineMode(url, false));
  const modes: BenchMode[] = [...RELAY_MODES, ...engines];
  const results = new Map<string, RelayMeasurement[]>();
  try {
    // A short warm-up so JIT, broker queue creation and the lineage database's creation do not
    // count against the first round.
    for (const mode of modes) await measure(mode, url, Math.min(200, n));
    for (let round = 0; round < rounds; round++) {
      for (const mode of modes) {
        const list = results.get(mode.name) ?? [];
        list.push(await measure(mode, url, n));
        results.set(mode.name, list);
      }
    }
  } finally {
    for (const engine of engines) await engine.dispose();
  }
  const baselineName = modes[0]!.name;
  const baseline = median(results.get(baselineName)!.map((r) => r.msgsPerSec));
  for (const mode of modes) {
    const list = results.get(mode.name)!;
    const rate = median(list.map((r) => r.msgsPerSec));
    const aim = AIMS[mode.name];
    console.log(
      JSON.stringify({
        bench: "rabbitmq",
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
        ...medianExtras(list),
      }),
    );
  }
}
