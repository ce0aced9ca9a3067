/**
 * `pnpm bench redis [N] [rounds]`: the 3-hop relay (q1 → q2 → q3 → sink) on the machine's Redis
 * (`FACTFLOW_REDIS_URL`, default redis://127.0.0.1:6379), through the shared relay harness:
 *
 * - `raw-ioredis` (the baseline): plain ioredis doing what the provider does on the wire — XADD to
 *   publish, a blocking XREADGROUP (COUNT = prefetch) per hop consumer, XADD onward then XACK.
 * - `provider`: each hop a subscription of `@factflow/infra-redis` whose handler publishes onward.
 * - `bullmq`: the same relay as BullMQ jobs (a worker per hop, same concurrency), for comparison
 *   with what most TypeScript teams already run on Redis.
 * - `engine+lineage`: the relay as a Factflow pipeline on the Redis provider, lineage on PostgreSQL.
 *
 * Every mode uses keys under its own random prefix and removes them when its round ends.
 */
import { randomBytes } from "node:crypto";
import { createRedisProvider } from "@factflow/infra-redis";
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { createEngineRelayMode, type SelfTimedMode } from "./_engine-relay.js";
import { providerRelayMode } from "./_provider-relay.js";
import { deleteRedisPrefix } from "./_redis-prefix.js";
import { type RelayMode, runRelayBench } from "./_relay-harness.js";

const URL_DEFAULT = process.env.FACTFLOW_REDIS_URL ?? "redis://127.0.0.1:6379";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;
const GROUP = "bench";

function benchPrefix(mode: string): string {
  return `ff-bench-${mode}-${randomBytes(4).toString("hex")}:`;
}

type Entries = [string, [string, string[]][]][] | null;

/** The baseline: plain ioredis streams, one blocking reader connection per hop, one command connection. */
export const rawIoredisMode: RelayMode = {
  name: "raw-ioredis",
  async start(url, queues, sink) {
    const prefix = benchPrefix("raw");
    const keys = queues.map((q) => `${prefix}${q}`);
    const commands = new Redis(url, { enableAutoPipelining: true });
    for (const key of keys) await commands.xgroup("CREATE", key, GROUP, "0", "MKSTREAM");
    const readers = keys.map(() => new Redis(url));
    let stopped = false;
    const loops = keys.map(async (key, i) => {
      const reader = readers[i] as Redis;
      const next = keys[i + 1];
      while (!stopped) {
        let reply: Entries;
        try {
          reply = (await reader.xreadgroup(
            "GROUP",
            GROUP,
            "c",
            "COUNT",
            PREFETCH,
            "BLOCK",
            1_000,
            "STREAMS",
            key,
            ">",
          )) as Entries;
        } catch {
          return;
        }
        const entries = reply?.[0]?.[1] ?? [];
        await Promise.all(
          entries.map(async ([id, fields]) => {
            sink.hop(Date.now() - Number(fields[3]));
            if (next === undefined) sink.arrived();
            else await commands.xadd(next, "*", "b", fields[1] as string, "t", String(Date.now()));
            await commands.xack(key, GROUP, id);
          }),
        );
      }
    });
    return {
      inject: async (index) => {
        await commands.xadd(keys[0] as string, "*", "b", JSON.stringify({ index }), "t", String(Date.now()));
      },
      async close() {
        stopped = true;
        for (const reader of readers) reader.disconnect();
        await Promise.allSettled(loops);
        commands.disconnect();
        await deleteRedisPrefix(url, prefix);
      },
    };
  },
};

/**
 * The port of the Redis the bench runs on: its CPU figures count the `redis-server` listening there
 * (its process title names `<address>:<port>`), not every Redis on the machine.
 */
function redisPort(url: string): string {
  return new URL(url).port || "6379";
}

/** The relay through Factflow's provider, under a key prefix of its own. */
export const providerMode: RelayMode = providerRelayMode(
  {
    create: (url) => createRedisProvider({ url, keyPrefix: benchPrefix("provider") }),
    cleanup: (url, provider) => deleteRedisPrefix(url, provider.config.keyPrefix),
  },
  PREFETCH,
);

/** The relay as BullMQ jobs: a worker per hop whose processor adds the job to the next queue. */
export const bullmqMode: RelayMode = {
  name: "bullmq",
  async start(url, queues, sink) {
    const prefix = benchPrefix("bullmq").slice(0, -1);
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    const jobOptions = { removeOnComplete: true, removeOnFail: true };
    const bull = queues.map((name) => new Queue(name, { connection, prefix }));
    const workerConnections = queues.map(() => new Redis(url, { maxRetriesPerRequest: null }));
    const workers = queues.map(
      (name, i) =>
        new Worker(
          name,
          async (job) => {
            sink.hop(Date.now() - Number((job.data as { sent: number }).sent));
            const next = bull[i + 1];
            if (next === undefined) sink.arrived();
            else await next.add("relay", { ...job.data, sent: Date.now() }, jobOptions);
          },
          { connection: workerConnections[i] as Redis, prefix, concurrency: PREFETCH },
        ),
    );
    await Promise.all([...bull.map((q) => q.waitUntilReady()), ...workers.map((w) => w.waitUntilReady())]);
    return {
      inject: async (index) => {
        await (bull[0] as Queue).add("relay", { index, sent: Date.now() }, jobOptions);
      },
      async close() {
        await Promise.all(workers.map((w) => w.close()));
        for (const queue of bull) {
          await queue.obliterate({ force: true }).catch(() => {});
          await queue.close();
        }
        connection.disconnect();
        for (const c of workerConnections) c.disconnect();
        await deleteRedisPrefix(url, prefix);
      },
    };
  },
};

/** The relay as a Factflow pipeline through the engine over the Redis provider, lineage on PostgreSQL. */
function engineMode(url: string, strictLineage = true): SelfTimedMode {
  const prefixes = new WeakMap<object, string>();
  return createEngineRelayMode(
    {
      create: () => {
        const keyPrefix = benchPrefix("engine");
        const provider = createRedisProvider({ url, keyPrefix });
        prefixes.set(provider, keyPrefix);
        return provider;
      },
      cleanup: async (provider) => {
        const prefix = prefixes.get(provider);
        if (prefix !== undefined) await deleteRedisPrefix(url, prefix);
      },
    },
    { prefetch: PREFETCH, strictLineage, ...(strictLineage ? {} : { name: "engine+lineage-relaxed" }) },
  );
}

/** The raw-client baseline first, then the provider and BullMQ; the harness adds the engine mode. */
export const RELAY_MODES: RelayMode[] = [rawIoredisMode, providerMode, bullmqMode];

/** `run([N, rounds])`: see `runRelayBench`. */
export function run(args: string[]): Promise<void> {
  return runRelayBench(args, {
    bench: "redis",
    url: URL_DEFAULT,
    relayModes: RELAY_MODES,
    engineMode,
    broker: (comm, cmdline) =>
      comm === "redis-server" &&
      cmdline.split(/\s+/).some((word) => word.endsWith(`:${redisPort(URL_DEFAULT)}`)),
  });
}
