import {
  type DurabilityCounters,
  type Logger,
  type MessageHandler,
  ProviderError,
} from "@factflow/protocols";
import {
  type DecodedDelivery,
  type ResolvedSubscribeOptions,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
  type UndecodableDelivery,
} from "@factflow/provider-kit";
import type { Redis } from "ioredis";
import { classifyRedisError } from "./classify-error.js";
import { decodeEntry, rawEntry } from "./codec.js";
import type { RedisConfig } from "./config.js";
import type { DelayedPump } from "./delayed-pump.js";
import { type Entry, EntrySettlement } from "./entry-settlement.js";
import { GroupMembership } from "./membership.js";
import { GROUP, type LaneKeys } from "./naming.js";
import { ReadLoop, type StreamEntries } from "./read-loop.js";

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: RedisConfig;
  /** The shared command connection (publishes, settlements, heartbeats). */
  readonly redis: Redis;
  /** Opens the subscription's own connection for its blocking reads. */
  readonly openReader: () => Redis;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  readonly lane: LaneKeys;
  /** This subscription's consumer name in the group; unique per subscription. */
  readonly consumer: string;
  readonly pump: DelayedPump;
  /** Name prefixes of consumers known to be dead (their server's cluster lease expired). */
  readonly deadConsumers: () => readonly string[];
  readonly onStop: (subscription: RedisSubscription) => void;
}

/**
 * One consumer of one lane's consumer group: the Redis port of the kit's `SubscriptionRuntime`
 * (which runs the handlers, decides and reports settlements). A read loop on a dedicated connection
 * reads new entries (`ReadLoop`); each settlement is one script: a batched XACK, or a retry,
 * dead-letter or hand-back copy written in the same script as the XACK, so Redis itself answers
 * whether this consumer still held the entry. The group membership keeps the held entries fresh
 * and reclaims those of dead or silent consumers (`GroupMembership`).
 */
export class RedisSubscription implements SubscriptionPort<Entry> {
  readonly runtime: SubscriptionRuntime<Entry>;
  readonly #deps: SubscriptionDeps;
  readonly #membership: GroupMembership;
  /** Entries handed to the runtime and not released yet, by id. */
  readonly #held = new Map<string, Entry>();
  #deliver: ((entry: Entry, redelivered: boolean) => void) | undefined;
  #loop: ReadLoop | undefined;
  #timers: NodeJS.Timeout[] = [];
  #stoppedAt: number | undefined;
  readonly #settlement: EntrySettlement;

  constructor(deps: SubscriptionDeps, handler: MessageHandler, options: ResolvedSubscribeOptions) {
    this.#deps = deps;
    this.#membership = new GroupMembership({ ...deps, visibilityTimeoutMs: deps.config.visibilityTimeoutMs });
    this.#settlement = new EntrySettlement({
      ...deps,
      retryable: (error) => this.classifyError(error, "settle").retryable,
      stoppedAt: () => this.#stoppedAt,
    });
    this.runtime = new SubscriptionRuntime({
      provider: "redis",
      destination: deps.lane.destination,
      handler,
      options,
      port: this,
      counters: deps.counters,
      logger: deps.logger,
      onStop: () => deps.onStop(this),
    });
  }

  async receive(deliver: (entry: Entry, redelivered: boolean) => void): Promise<void> {
    this.#deliver = deliver;
    const { config, lane, consumer, logger } = this.#deps;
    await this.#membership.join();
    const reader = this.#deps.openReader();
    const runtime = this.runtime;
    this.#loop = new ReadLoop({
      reader,
      stream: lane.stream,
      consumer,
      blockMs: config.blockMs,
      destination: lane.destination,
      logger,
      window: () => ({
        prefetch: runtime.prefetch,
        concurrency: runtime.concurrency,
        unsettled: runtime.unsettled,
        waiting: runtime.waiting,
        running: runtime.running,
      }),
      rejoin: () => this.#membership.join(),
      accept: (entries, redelivered) => this.#accept(entries, redelivered),
    });
    await reader.connect();
    this.#loop.start();
    const { visibilityTimeoutMs, reclaimIntervalMs } = config;
    const heartbeat = () => void this.#membership.touch(this.#held.keys());
    this.#timers.push(
      setInterval(heartbeat, Math.max(100, visibilityTimeoutMs / 3)),
      setInterval(() => void this.reclaim(), reclaimIntervalMs ?? Math.max(250, visibilityTimeoutMs / 2)),
    );
    this.#deps.pump.start();
    // Entries a dead consumer left behind are taken over from the start, not after the first tick.
    void this.reclaim();
  }

  /** Takes over entries of dead consumers and entries idle past the visibility timeout, within the prefetch. */
  reclaim(): Promise<void> {
    if (this.#stoppedAt !== undefined) return Promise.resolve();
    const room = () => this.runtime.prefetch - this.#held.size;
    return this.#membership.reclaim(room, (entries) => this.#accept(entries, true));
  }

  #accept(entries: StreamEntries, redelivered: boolean): void {
    const { redis, lane } = this.#deps;
    for (const [entryId, fields] of entries) {
      if (fields === null) {
        // Deleted from the stream while pending: nothing to deliver, clear it from the group.
        void redis.xack(lane.stream, GROUP, entryId).catch(() => undefined);
        continue;
      }
      // Entries read while stopping stay pending; `close` hands them back.
      if (this.#held.has(entryId) || this.#stoppedAt !== undefined) continue;
      const entry: Entry = { entryId, raw: rawEntry(fields) };
      this.#held.set(entryId, entry);
      // A hand-back copy carries the field `r`: handed out again, so flagged redelivered.
      this.#deliver?.(entry, redelivered || entry.raw.handedBack);
    }
  }

  async stopReceiving(): Promise<void> {
    this.#stoppedAt = Date.now();
    for (const timer of this.#timers.splice(0)) clearInterval(timer);
    this.#deps.pump.stop();
    await this.#loop?.stop();
  }

  decode(entry: Entry): DecodedDelivery | UndecodableDelivery {
    return decodeEntry(entry.raw, entry.entryId);
  }

  /** The scripts find out whether this consumer still holds the entry. */
  isCurrent(): boolean {
    return true;
  }

  ack(entry: Entry): Promise<boolean> {
    return this.#settlement.ack(entry);
  }

  handBack(entry: Entry): Promise<boolean> {
    return this.#settlement.handBack(entry);
  }

  publishCopy(entry: Entry, copy: SettlementCopy): Promise<"settled" | "superseded"> {
    return this.#settlement.copy(entry, copy);
  }

  classifyError(error: unknown, operation: string): ProviderError {
    const classified = classifyRedisError(error, operation, this.#deps.config.url);
    return classified instanceof ProviderError
      ? classified
      : new ProviderError("redis", "unknown", classified.message, { cause: error });
  }

  release(entry: Entry): void {
    this.#held.delete(entry.entryId);
    this.#loop?.wake();
  }

  handlerFreed(): void {
    this.#loop?.wake();
  }

  /** Hands back entries assigned to this consumer that never reached the runtime, then leaves the group. */
  async close(): Promise<void> {
    const stray = (await this.#membership.pending()).filter(
      ([id, fields]) => fields !== null && !this.#held.has(id),
    );
    await Promise.allSettled(
      stray.map(([entryId, fields]) =>
        this.#settlement.handBack({ entryId, raw: rawEntry(fields as string[]) }, false),
      ),
    );
    await this.#membership.leave();
  }
}
