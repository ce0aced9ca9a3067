import { mkdir } from "node:fs/promises";
import {
  type Logger,
  type ProviderCapabilities,
  ProviderError,
  type QueueProtocol,
  silentLogger,
} from "@factflow/protocols";
import {
  destinationMemo,
  emptyDurabilityCounters,
  guardProvider,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import { createAdmin } from "./admin.js";
import { Broker } from "./broker.js";
import { classifyError } from "./classify-error.js";
import { type EmbeddedConfig, type EmbeddedConfigInput, parseEmbeddedConfig } from "./config.js";
import { invalidInput, PROVIDER_NAME } from "./errors.js";
import { FileJournal } from "./file-journal.js";
import { memoryJournal } from "./journal.js";
import { nodeLogFile } from "./log-file.js";
import {
  acquireLock,
  type CorruptTail,
  type DamagedLog,
  type RecoveredState,
  recoverLog,
} from "./log-store.js";
import { prepareMessage, type StoredMessage } from "./message.js";
import { parseKey, resolveTarget, validateSubscriptionName } from "./naming.js";
import { parseDefinition, type QueueDefinition } from "./queue-options.js";
import { encodeRecord } from "./record-codec.js";

/** Figures of the embedded store: what recovery found and what the log looks like now. */
export interface EmbeddedStoreStats {
  readonly mode: "memory" | "file";
  /** Messages held (waiting, scheduled, in flight or dead-lettered). */
  readonly liveMessages: number;
  /** Body + header bytes of those messages. */
  readonly liveBytes: number;
  /** Body + header bytes of the live messages whose content is in memory (see `memoryBudgetBytes`). */
  readonly residentBytes: number;
  /** Live messages whose content is paged out to the log, read back when delivered (file mode). */
  readonly pagedOutMessages: number;
  /** Current log size (file mode). */
  readonly logBytes: number;
  readonly commits: number;
  readonly compactions: number;
  /** Live messages rebuilt from the log by `connect()`. */
  readonly recoveredMessages: number;
  /** Records read from the log by `connect()`. */
  readonly recoveredRecords: number;
  /** Damaged tails found by `connect()` (0 or 1 per connect). */
  readonly corruptTails: number;
  readonly corruptTail?: CorruptTail;
  /** Damaged stretches in the middle of the log skipped by `connect()` (their neighbours recovered). */
  readonly damagedRanges: number;
  readonly damaged?: DamagedLog;
}

/** The embedded provider: a `QueueProtocol` plus runtime queue definitions and store figures. */
export interface EmbeddedProvider extends QueueProtocol {
  readonly name: "embedded";
  readonly config: EmbeddedConfig;
  /**
   * Defines (or redefines) a queue: its ordering, FIFO group field and priorities, and defaults for
   * subscriptions that leave prefetch, concurrency, retry or handler timeout out. In file mode the
   * definition is persisted before this resolves and recreated by every later `connect()`.
   */
  defineQueue(
    destination: string,
    definition?: QueueDefinition,
  ): Promise<{ destination: string; changed: boolean }>;
  storeStats(): EmbeddedStoreStats;
}

/** Collaborators that are not configuration. */
export interface EmbeddedProviderOptions {
  /** Receives recovery warnings (damaged tails) and compaction notices. @default silentLogger */
  readonly logger?: Logger;
}

const TARGET_CACHE_SIZE = 4096;

function restore(broker: Broker, state: RecoveredState): void {
  for (const key of state.subscriptions) {
    const parsed = parseKey(key);
    if (parsed?.kind === "topic") broker.subscriptionQueue(parsed.name, parsed.subscription);
  }
  for (const [key, definition] of state.definitions) {
    const parsed = parseKey(key);
    if (parsed?.kind === "queue") broker.applyDefinition(broker.queueNamed(parsed.name), definition);
  }
  const now = Date.now();
  for (const message of state.messages) {
    const parsed = parseKey(message.queueKey);
    if (parsed === undefined) continue;
    const queue =
      parsed.kind === "queue"
        ? broker.queueNamed(parsed.name)
        : broker.subscriptionQueue(parsed.name, parsed.subscription).queue;
    broker.adopt(message);
    if (message.dead !== undefined) queue.dead.set(message.seq, message);
    else {
      queue.enqueue(message, now);
      broker.pageOutIfOverBudget(message);
    }
  }
  broker.nextSeq = state.maxSeq + 1;
}

function* snapshotRecords(broker: Broker): Generator<string | StoredMessage> {
  for (const queue of broker.queues.values()) {
    if (queue.isTopicSubscription) yield encodeRecord({ t: "s", q: queue.key });
    if (queue.definition !== undefined) yield encodeRecord({ t: "q", q: queue.key, o: queue.definition });
  }
  yield* broker.live.values();
}

/**
 * Creates the embedded provider, the default that needs no broker. `mode: "memory"` (the default)
 * keeps everything in the process; `mode: "file"` keeps an append-only, group-committed log under
 * `dataDir` that `connect()` recovers. Throws a `ConfigError` for an invalid config.
 */
export function createEmbeddedProvider(
  input?: EmbeddedConfigInput,
  options: EmbeddedProviderOptions = {},
): EmbeddedProvider {
  const config = parseEmbeddedConfig(input);
  const logger = options.logger ?? silentLogger;
  let broker: Broker | undefined;
  let journal: FileJournal | undefined;
  let releaseLock: (() => Promise<void>) | undefined;
  let recovered: RecoveredState | undefined;
  /** Publish destinations already checked: a pipeline publishes to a few queues over and over. */
  const publishTarget = destinationMemo(resolveTarget, TARGET_CACHE_SIZE);

  /** The open broker. The kit's guard lets calls through only while connected, so it is there. */
  const use = (operation: string): Broker => {
    if (broker === undefined || broker.closed) {
      throw new ProviderError(PROVIDER_NAME, "closed", `${operation}: the provider is not open`);
    }
    return broker;
  };

  const capabilities: ProviderCapabilities = Object.freeze({
    priorities: true,
    retryDelay: "exponential",
    delayGranularityMs: 5,
    fifo: true,
    messageGroups: true,
    orderedGroups: true,
    durable: config.mode === "file",
    maxMessageBytes: config.maxMessageBytes,
    // One broker in this process: its queues count every consumer's deliveries and scheduled retries.
    brokerWideStats: true,
  });

  async function open(): Promise<void> {
    const b = new Broker(config, memoryJournal, logger);
    if (config.mode === "file") {
      try {
        await mkdir(config.dataDir, { recursive: true });
      } catch (error) {
        throw classifyError(error, `creating the data directory ${config.dataDir}`);
      }
      releaseLock = await acquireLock(config.dataDir);
      try {
        const log = await recoverLog(config.dataDir, logger);
        recovered = log.state;
        journal = new FileJournal(
          log.path,
          nodeLogFile(log.path, log.handle),
          log.state.logBytes,
          config,
          () => ({
            records: snapshotRecords(b),
            liveBytes: b.liveBytes,
            liveCount: b.liveCount,
            relocated: () => b.relocated(),
          }),
          logger,
        );
        journal.openReader();
        b.journal = journal;
        restore(b, log.state);
      } catch (error) {
        await releaseLock();
        releaseLock = undefined;
        throw error;
      }
    }
    broker = b;
  }

  // The kit's guard adds the lifecycle (connect once, close once, no use before connect or after
  // close) and validates subscribe options against the capabilities before they reach this object.
  const provider: UnguardedProvider<EmbeddedProvider> = {
    name: PROVIDER_NAME,
    config,
    capabilities,
    admin: createAdmin(use),

    connect: open,

    async close(): Promise<void> {
      await broker?.close();
      await journal?.close();
      await releaseLock?.();
    },

    async publish(destination, message) {
      const b = use("publish");
      const target = publishTarget(destination);
      const prepared = prepareMessage(target.destination, message, config.maxMessageBytes, Date.now());
      // Read before the message is stored: by the time its commit resolves it may be paged out.
      const id = prepared.id;
      const durable = b.publish(target, prepared);
      if (durable !== undefined) await durable;
      return { id };
    },

    async subscribe(destination, handler, options) {
      const b = use("subscribe");
      const target = resolveTarget(destination);
      const name = validateSubscriptionName(options.subscription);
      let queue = target.kind === "queue" ? b.queueNamed(target.name) : undefined;
      if (queue === undefined) {
        const sub = b.subscriptionQueue(target.name, name);
        if (sub.created) await b.journal.subscribe(sub.queue.key);
        queue = sub.queue;
      }
      // Closed while the journal wrote: the guard turns this into a provider_closed error.
      if (b.closed)
        throw new ProviderError(PROVIDER_NAME, "closed", "subscribe: the provider closed meanwhile");
      const subscription = b.attach(queue, target.destination, handler, options);
      await subscription.runtime.start();
      return subscription.runtime;
    },

    counters() {
      return broker === undefined ? emptyDurabilityCounters() : { ...broker.counters };
    },

    async defineQueue(destination: string, definition: QueueDefinition = {}) {
      const b = use("defineQueue");
      const target = resolveTarget(destination);
      if (target.kind !== "queue") {
        throw invalidInput(
          "invalid_destination",
          `defineQueue takes a "/queue/..." destination, got ${destination}`,
        );
      }
      const parsed = parseDefinition(target.destination, definition);
      const queue = b.queueNamed(target.name);
      const changed = b.applyDefinition(queue, parsed);
      if (changed) await b.journal.define(queue.key, parsed);
      return { destination: target.destination, changed };
    },

    storeStats(): EmbeddedStoreStats {
      const stats = {
        mode: config.mode,
        liveMessages: broker?.liveCount ?? 0,
        liveBytes: broker?.liveBytes ?? 0,
        residentBytes: broker?.residentBytes ?? 0,
        pagedOutMessages: broker?.pagedOut ?? 0,
        logBytes: journal?.stats.logBytes ?? 0,
        commits: journal?.stats.commits ?? 0,
        compactions: journal?.stats.compactions ?? 0,
        recoveredMessages: recovered?.messages.length ?? 0,
        recoveredRecords: recovered?.records ?? 0,
        corruptTails: recovered?.corruptTail === undefined ? 0 : 1,
        damagedRanges: recovered?.damaged?.ranges ?? 0,
      };
      return {
        ...stats,
        ...(recovered?.corruptTail === undefined ? {} : { corruptTail: recovered.corruptTail }),
        ...(recovered?.damaged === undefined ? {} : { damaged: recovered.damaged }),
      };
    },

    health() {
      const problems: string[] = [];
      const tail = recovered?.corruptTail;
      if (tail !== undefined)
        problems.push(
          `queue log had a damaged tail at byte ${tail.offset} (${tail.problem}); ${tail.bytes} bytes moved to ${tail.movedTo}`,
        );
      const damaged = recovered?.damaged;
      if (damaged !== undefined)
        problems.push(
          `queue log was damaged in ${damaged.ranges} place(s) (${damaged.problems.join(", ")}); ${damaged.bytes} unreadable bytes copied to ${damaged.movedTo}, every intact record recovered, ${damaged.restored} of the places from the record's intact copy`,
        );
      return { problems };
    },
  };
  return guardProvider(provider, { factory: "createEmbeddedProvider()", guarded: ["defineQueue"] });
}
