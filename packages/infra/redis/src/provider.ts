import { randomBytes, randomUUID } from "node:crypto";
import { hostname } from "node:os";
import {
  type Logger,
  type ProviderCapabilities,
  ProviderError,
  type QueueProtocol,
} from "@factflow/protocols";
import {
  checkDestination,
  compactHeaders,
  destinationMemo,
  emptyDurabilityCounters,
  guardProvider,
  prepareOutbound,
  providerLogger,
  settleWithin,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import type { Redis } from "ioredis";
import { RedisAdmin } from "./admin.js";
import { classifyRedisError } from "./classify-error.js";
import { parseRedisConfig, type RedisConfig, type RedisConfigInput } from "./config.js";
import { corkUntilNextTurn, openCommandConnection, openReaderConnection } from "./connections.js";
import { DelayedPump } from "./delayed-pump.js";
import { baseKey, laneFor, subscriptionSetKey, topicLanePrefix } from "./naming.js";
import { nonce, PUBLISH_TOPIC, runScript, SCHEDULE } from "./scripts.js";
import { RedisSubscription } from "./subscription.js";

/** Options besides the config. */
export interface RedisProviderOptions {
  /** @default silentLogger */
  readonly logger?: Logger;
  /**
   * Names this process's consumers `<node>/<random>-<n>`, so another process told that this node is dead
   * (`claimFromNode`) knows which consumers' pending entries to claim. A cluster passes its node id.
   * @default `<hostname>-<pid>`
   */
  readonly node?: string;
}

/** A Redis provider: the `QueueProtocol` plus tooling hooks. */
export interface RedisProvider extends QueueProtocol {
  readonly config: RedisConfig;
  /**
   * Tells the provider that the process created with `node` is dead (its cluster lease expired):
   * every subscription of this process claims the pending entries of that node's consumers at once,
   * whatever their idle time, instead of after the visibility timeout. Entries beyond a
   * subscription's free prefetch are claimed by its next reclaim passes, for one visibility
   * timeout; after that the usual reclaim by idle time takes what is left.
   */
  claimFromNode(node: string): Promise<void>;
}

/** What the provider can do on Redis 7 streams, as the conformance suite and validation read it. */
export const REDIS_CAPABILITIES: ProviderCapabilities = Object.freeze({
  // A stream is an append-only log read in order: there is no way to let a later entry overtake.
  priorities: false,
  retryDelay: "exponential",
  // Retries wait in a sorted set scored by Redis TIME (ms) and are moved by this process's timer.
  delayGranularityMs: 10,
  // Competing consumers read one group; nothing serialises them, so no FIFO or message groups.
  fifo: false,
  messageGroups: false,
  // Ordered groups need one consumer that sees the whole stream in order (the kit's lanes do the
  // rest); a consumer group shares it out. A lease per ordered lane would do it (docs/providers/redis.md).
  orderedGroups: false,
  // Entries live in Redis; surviving a Redis restart needs AOF or RDB persistence (docs/providers/redis.md).
  durable: true,
  maxMessageBytes: 16_777_216,
  // Stream entries (every consumer's pending ones included) plus the delayed set.
  brokerWideStats: true,
});

const MIN_VERSION: readonly [number, number] = [6, 2];

/** Refuses a Redis older than 6.2 (no XAUTOCLAIM), with a message saying so. */
async function checkVersion(redis: Redis, url: string): Promise<void> {
  const info = await redis.info("server");
  const version = /redis_version:(\d+)\.(\d+)/.exec(info);
  if (version === null) return;
  const major = Number(version[1]);
  const minor = Number(version[2]);
  if (major < MIN_VERSION[0] || (major === MIN_VERSION[0] && minor < MIN_VERSION[1])) {
    throw new ProviderError(
      "redis",
      "unknown",
      `Redis ${major}.${minor} at ${url} is too old: the provider needs Redis 6.2 or newer (XAUTOCLAIM); Redis 7 is recommended`,
      { retryable: false },
    );
  }
}

/**
 * Creates a Redis Streams provider. Nothing connects until `connect()`.
 *
 * @example
 * const provider = createRedisProvider({ url: process.env.FACTFLOW_REDIS_URL });
 * await provider.connect();
 */
export function createRedisProvider(
  input: RedisConfigInput = {},
  options: RedisProviderOptions = {},
): RedisProvider {
  const config = parseRedisConfig(input);
  const logger = providerLogger("redis", options.logger);
  const counters = emptyDurabilityCounters();
  const subscriptions = new Set<RedisSubscription>();
  /** Delayed-set pumps of this process's subscriptions, by lane stream, woken by local publishes. */
  const pumps = new Map<string, Set<DelayedPump>>();
  // The random part keeps a restarted process that reuses its node id apart from its dead self.
  const consumerBase = `${options.node ?? `${hostname()}-${process.pid}`}/${randomBytes(3).toString("hex")}-`;
  /** Consumer name prefixes of dead nodes, each until its claim window ends (ms since epoch). */
  const deadNodes = new Map<string, number>();
  const deadConsumers = (): readonly string[] => {
    if (deadNodes.size === 0) return [];
    const now = Date.now();
    for (const [prefix, until] of deadNodes) if (until <= now) deadNodes.delete(prefix);
    return [...deadNodes.keys()];
  };
  let consumerCount = 0;
  let redis: Redis | undefined;
  const connected = (): Redis => {
    if (redis === undefined)
      throw new ProviderError("redis", "connection", "not connected: await provider.connect() first");
    return redis;
  };

  /** The keys a publish writes, worked out once per destination (publishes reuse a few). */
  interface PublishTarget {
    readonly kind: "queue" | "topic";
    /** Queue: its stream. Topic: its subscription set. */
    readonly key: string;
    /** Queue: its delayed set. Topic: the key prefix of its subscriptions' lanes. */
    readonly aside: string;
  }
  const targetOf = destinationMemo((destination): PublishTarget => {
    const { kind, name } = checkDestination("redis", destination);
    const lane = kind === "queue" ? laneFor(config.keyPrefix, destination) : undefined;
    return lane === undefined
      ? {
          kind,
          key: subscriptionSetKey(config.keyPrefix, name),
          aside: topicLanePrefix(config.keyPrefix, name),
        }
      : { kind, key: lane.stream, aside: lane.delayed };
  });

  const wake = (streamPrefix: string, exact: boolean, delayMs: number) => {
    for (const [stream, set] of pumps) {
      if (exact ? stream === streamPrefix : stream.startsWith(streamPrefix))
        for (const pump of set) pump.wakeIn(delayMs);
    }
  };

  const admin = new RedisAdmin({ config, redis: connected });

  const provider: UnguardedProvider<RedisProvider> = {
    name: "redis",
    config,
    capabilities: Object.freeze({ ...REDIS_CAPABILITIES, maxMessageBytes: config.maxMessageBytes }),
    admin,

    async connect() {
      const client = openCommandConnection(config, logger);
      try {
        await client.connect();
        await checkVersion(client, config.url);
      } catch (error) {
        client.disconnect();
        throw classifyRedisError(error, `connect to Redis at ${config.url}`, config.url);
      }
      redis = client;
      Object.assign(counters, emptyDurabilityCounters());
    },

    async close() {
      await Promise.allSettled([...subscriptions].map((s) => s.runtime.unsubscribe()));
      const client = redis;
      if (client === undefined) return;
      await settleWithin(client.quit(), 2_000);
      client.disconnect();
    },

    async publish(destination, message) {
      const target = targetOf(destination);
      const prepared = prepareOutbound("redis", destination, message, {
        maxBytes: config.maxMessageBytes,
        newId: randomUUID,
      });
      const headersJson = JSON.stringify(compactHeaders(prepared));
      const client = connected();
      corkUntilNextTurn(client);
      counters.published += 1;
      const delay = prepared.delayMs;
      try {
        if (target.kind === "queue") {
          if (delay > 0) {
            await runScript(
              client,
              SCHEDULE,
              [target.aside],
              [headersJson, prepared.bodyJson, Math.ceil(delay), nonce()],
            );
            wake(target.key, true, delay);
          } else {
            await client.xadd(target.key, "*", "b", prepared.bodyJson, "h", headersJson);
          }
        } else {
          await runScript(
            client,
            PUBLISH_TOPIC,
            [target.key],
            [target.aside, headersJson, prepared.bodyJson, Math.ceil(delay), nonce()],
          );
          if (delay > 0) wake(target.aside, false, delay);
        }
      } catch (error) {
        throw classifyRedisError(error, `publish to "${destination}"`, config.url);
      }
      counters.confirmed += 1;
      return { id: prepared.id };
    },

    async subscribe(destination, handler, options) {
      const lane = laneFor(config.keyPrefix, destination, options.subscription);
      const client = connected();
      consumerCount += 1;
      const pump = new DelayedPump(client, lane, config.delayPollMs, logger);
      let set = pumps.get(lane.stream);
      if (set === undefined) {
        set = new Set();
        pumps.set(lane.stream, set);
      }
      set.add(pump);
      const subscription = new RedisSubscription(
        {
          config,
          redis: client,
          openReader: () => openReaderConnection(config, logger),
          counters,
          logger,
          lane,
          consumer: `${consumerBase}${consumerCount}`,
          pump,
          deadConsumers,
          onStop: (s) => {
            subscriptions.delete(s);
            const live = pumps.get(lane.stream);
            live?.delete(pump);
            if (live?.size === 0) pumps.delete(lane.stream);
          },
        },
        handler,
        options,
      );
      subscriptions.add(subscription);
      try {
        // A subscription that cannot start is stopped by the runtime before this rejects.
        await subscription.runtime.start();
      } catch (error) {
        throw classifyRedisError(error, `subscribe to "${destination}"`, config.url);
      }
      return subscription.runtime;
    },

    async claimFromNode(node: string) {
      if (node === options.node) return;
      deadNodes.set(`${node}/`, Date.now() + config.visibilityTimeoutMs);
      await Promise.allSettled([...subscriptions].map((s) => s.reclaim()));
    },

    counters() {
      return { ...counters };
    },
  };
  return guardProvider(provider, { factory: "createRedisProvider()" });
}

/** The hash-tagged base key of a destination, for tooling that inspects Redis directly. */
export function redisKeyOf(prefix: string, destination: string): string {
  const { kind, name } = checkDestination("redis", destination);
  return baseKey(prefix, kind, name);
}
