import {
  type DeadLetter,
  type DeadLetterPage,
  type DeadLetterSource,
  type DeleteDestinationOptions,
  type DeleteDestinationResult,
  type DestinationInfo,
  type DestinationStats,
  Headers,
  ProviderError,
  type PurgeDestinationResult,
  type QueueAdminProtocol,
} from "@factflow/protocols";
import {
  type DistinctDeadLetters,
  deadLetterFromHeaders,
  deadLetterKey,
  distinctDeadLetters,
  PUBLISHED_AT_HEADER,
  redriveHeaders,
} from "@factflow/provider-kit";
import type { ConfirmChannel, GetMessage, Message } from "amqplib";
import { classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager } from "./connection-manager.js";
import { deleteRabbitMqDestination } from "./delete-destination.js";
import { decodeMessage, publishOptions, stringHeaders } from "./envelope-codec.js";
import { amqpCopy } from "./failure-router.js";
import { handBackAndClose } from "./hand-back.js";
import { deadLetterQueueName, resolveDestination, topicSubscriptionQueue } from "./naming.js";
import type { Topology } from "./topology.js";

/** What the admin needs from the provider besides the broker. */
export interface AdminDeps {
  readonly config: RabbitMqConfig;
  readonly connection: ConnectionManager;
  readonly topology: Topology;
  readonly destinations: () => readonly DestinationInfo[];
  readonly inFlight: (sourceQueue: string) => number;
}

interface ResolvedSource {
  readonly describe: string;
  readonly sourceQueue: string;
  readonly deadLetterQueue: string;
}

/** Largest batch a redrive holds unacknowledged at once. */
const REDRIVE_BATCH = 100;

/**
 * The queue admin API over plain AMQP (no management plugin). Depth and consumers come from a
 * passive declare; dead letters are browsed with `basic.get` on a dedicated channel that is then
 * closed, which puts every fetched message back in its place. Redrive and discard fetch on their
 * own confirm channel, republish (confirmed) and ack, so each count is what the broker did.
 * Operations on one dead-letter queue are serialised within the process.
 *
 * A dead letter stored twice (its copy sent again after a publisher confirm was lost in a connection
 * cut) counts, lists and redrives once: every operation that reads the dead-letter queue reads all
 * of it, keeps the first copy of each dead letter (`distinctDeadLetters`, by `deadLetterKey`) and
 * acks the later copies, so they leave the broker as well. `dlqDepth` is that count too, so a
 * non-empty dead-letter queue is read whole by `stats`.
 */
export class RabbitMqAdmin implements QueueAdminProtocol {
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(private readonly deps: AdminDeps) {}

  async listDestinations(): Promise<readonly DestinationInfo[]> {
    return this.deps.destinations();
  }

  private resolve(source: DeadLetterSource): ResolvedSource {
    const target = resolveDestination(source.destination);
    if (target.kind === "queue") {
      return {
        describe: source.destination,
        sourceQueue: target.queue,
        deadLetterQueue: deadLetterQueueName(target.queue, "queue"),
      };
    }
    if (source.subscription === undefined) {
      throw new ProviderError(
        "rabbitmq",
        "invalid-input",
        `"${source.destination}" is a topic: name the subscription, dead letters and depth are kept per subscription`,
        { code: "invalid_argument" },
      );
    }
    const queue = topicSubscriptionQueue(source.destination, source.subscription);
    return {
      describe: `${source.destination} (subscription ${source.subscription})`,
      sourceQueue: queue,
      deadLetterQueue: deadLetterQueueName(queue, "topic"),
    };
  }

  private exclusive<T>(key: string, op: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(key) ?? Promise.resolve();
    const next = previous.then(op, op);
    const settled = next.catch(() => {});
    this.locks.set(key, settled);
    void settled.then(() => {
      if (this.locks.get(key) === settled) this.locks.delete(key);
    });
    return next;
  }

  async stats(source: DeadLetterSource): Promise<DestinationStats> {
    const resolved = this.resolve(source);
    const { topology } = this.deps;
    const main = await topology.check(resolved.sourceQueue);
    let scheduled = 0;
    for (const name of topology.declaredQueues) {
      if (!name.startsWith(`${resolved.sourceQueue}:retry.`)) continue;
      scheduled += (await topology.check(name))?.messageCount ?? 0;
    }
    const dlq = await topology.check(resolved.deadLetterQueue);
    const dlqDepth = (dlq?.messageCount ?? 0) === 0 ? 0 : await this.countDeadLetters(resolved);
    const stats: { -readonly [K in keyof DestinationStats]: DestinationStats[K] } = {
      destination: source.destination,
      depth: (main?.messageCount ?? 0) + scheduled,
      consumers: main?.consumerCount ?? 0,
      inFlight: this.deps.inFlight(resolved.sourceQueue),
      dlqDepth,
    };
    if (source.subscription !== undefined) stats.subscription = source.subscription;
    return stats;
  }

  /**
   * Runs `op` on a fresh confirm channel. Messages `op` fetched and did not ack go back to `fence` (the
   * queue they came from) before the call returns; see {@link handBackAndClose}.
   */
  private async withChannel<T>(
    what: string,
    fence: string,
    op: (channel: ConfirmChannel, returned: Set<string>) => Promise<T>,
  ): Promise<T> {
    const live = await this.deps.connection.waitForConnection(
      Date.now() + this.deps.config.publishTimeoutMs,
      what,
    );
    let channel: ConfirmChannel;
    try {
      channel = await live.model.createConfirmChannel();
    } catch (error) {
      throw classifyAmqpError(error, what, this.deps.config.url);
    }
    channel.on("error", () => {});
    const returned = new Set<string>();
    channel.on("return", (message: Message) => returned.add(String(message.properties.messageId)));
    try {
      return await op(channel, returned);
    } catch (error) {
      throw classifyAmqpError(error, what, this.deps.config.url);
    } finally {
      await handBackAndClose(channel, fence);
    }
  }

  /** The dead letters held now, each counted once; surplus copies found on the way are removed. */
  private countDeadLetters(resolved: ResolvedSource): Promise<number> {
    return this.exclusive(resolved.deadLetterQueue, async () => {
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return 0;
      return this.withChannel(
        `counting dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        async (channel) => (await readDeadLetters(channel, resolved.deadLetterQueue, stored)).letters.length,
      );
    });
  }

  async browseDeadLetters(
    source: DeadLetterSource,
    page: { offset: number; limit: number },
  ): Promise<DeadLetterPage> {
    const resolved = this.resolve(source);
    const offset = Math.max(0, Math.floor(page.offset));
    const limit = Math.max(0, Math.floor(page.limit));
    return this.exclusive(resolved.deadLetterQueue, async () => {
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return { total: 0, offset, items: [] };
      return this.withChannel(
        `browsing dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        async (channel) => {
          const { letters } = await readDeadLetters(channel, resolved.deadLetterQueue, stored);
          const items = letters.slice(offset, offset + limit).map(toDeadLetter);
          return { total: letters.length, offset, items };
        },
      );
    });
  }

  async redriveAll(source: DeadLetterSource): Promise<{ redriven: number }> {
    const resolved = this.resolve(source);
    return this.exclusive(resolved.deadLetterQueue, async () => {
      // Bounded by the depth now, so messages that fail again and come back are not looped forever.
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return { redriven: 0 };
      await this.deps.topology.ensureQueue(resolved.sourceQueue, resolved.describe);
      return this.withChannel(
        `redriving dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        async (channel, returned) => {
          const { letters } = await readDeadLetters(channel, resolved.deadLetterQueue, stored);
          let redriven = 0;
          for (let start = 0; start < letters.length; start += REDRIVE_BATCH) {
            const batch = letters.slice(start, start + REDRIVE_BATCH);
            for (const message of batch) this.republish(channel, resolved.sourceQueue, message);
            await channel.waitForConfirms();
            for (const message of batch) {
              if (returned.has(String(message.properties.messageId))) {
                throw new ProviderError(
                  "rabbitmq",
                  "not-found",
                  `redrive of "${resolved.describe}": the source queue "${resolved.sourceQueue}" is gone; re-create it and redrive again`,
                );
              }
              channel.ack(message);
              redriven += 1;
            }
          }
          return { redriven };
        },
      );
    });
  }

  private republish(channel: ConfirmChannel, queue: string, message: Message): void {
    const copy = amqpCopy(message, redriveHeaders);
    channel.publish("", queue, copy.content, publishOptions(copy, true));
  }

  async redriveOne(source: DeadLetterSource, messageId: string): Promise<{ redriven: boolean }> {
    const resolved = this.resolve(source);
    const found = await this.takeOne(resolved, messageId, "redriving", async (channel, message, returned) => {
      await this.deps.topology.ensureQueue(resolved.sourceQueue, resolved.describe);
      this.republish(channel, resolved.sourceQueue, message);
      await channel.waitForConfirms();
      if (returned.has(String(message.properties.messageId))) {
        throw new ProviderError(
          "rabbitmq",
          "not-found",
          `redrive of "${resolved.describe}": the source queue "${resolved.sourceQueue}" is gone`,
        );
      }
    });
    return { redriven: found };
  }

  async discardOne(source: DeadLetterSource, messageId: string): Promise<{ discarded: boolean }> {
    const resolved = this.resolve(source);
    const found = await this.takeOne(resolved, messageId, "discarding", async () => {});
    return { discarded: found };
  }

  /**
   * Deletes the queue (or subscription queue), its retry holding queues and its dead-letter queue
   * when that is empty or `keepDeadLetters` is off. Serialised with the other dead-letter operations.
   */
  async deleteDestination(
    source: DeadLetterSource,
    options: DeleteDestinationOptions = {},
  ): Promise<DeleteDestinationResult> {
    const resolved = this.resolve(source);
    return this.exclusive(resolved.deadLetterQueue, () =>
      deleteRabbitMqDestination(
        this.deps.topology,
        this.deps.config,
        resolved,
        this.deps.inFlight(resolved.sourceQueue),
        options,
      ),
    );
  }

  async purgeDestination(source: DeadLetterSource): Promise<PurgeDestinationResult> {
    const resolved = this.resolve(source);
    const { topology } = this.deps;
    // A passive check first: purging a queue that does not exist would close the channel (404).
    if ((await topology.check(resolved.sourceQueue)) === undefined)
      return { purged: 0, reason: `${resolved.describe} does not exist` };
    // queue.purge removes what is ready; unacknowledged deliveries stay with their consumers and
    // scheduled retries wait in their own holding queues.
    const what = `purging "${resolved.describe}"`;
    try {
      const { messageCount } = await topology.run(what, (channel) =>
        channel.purgeQueue(resolved.sourceQueue),
      );
      return { purged: messageCount };
    } catch (error) {
      throw classifyAmqpError(error, what, this.deps.config.url);
    }
  }

  /**
   * Finds one dead letter by id (the first held, with its surplus copies removed), runs `before` on
   * it and acks it; every other fetched message goes back.
   */
  private takeOne(
    resolved: ResolvedSource,
    messageId: string,
    verb: string,
    before: (channel: ConfirmChannel, message: GetMessage, returned: Set<string>) => Promise<void>,
  ): Promise<boolean> {
    return this.exclusive(resolved.deadLetterQueue, async () => {
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return false;
      return this.withChannel(
        `${verb} dead letter "${messageId}" of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        async (channel, returned) => {
          const { letters } = await readDeadLetters(channel, resolved.deadLetterQueue, stored);
          const message = letters.find((letter) => idOf(letter) === messageId);
          if (message === undefined) return false;
          await before(channel, message, returned);
          channel.ack(message);
          // The ack must reach the broker before the channel closes and requeues the rest.
          await channel.waitForConfirms();
          return true;
        },
      );
    });
  }
}

/**
 * Fetches up to `stored` copies from the dead-letter queue (held unacked on `channel`, so they go
 * back when it closes) and splits them into dead letters and surplus copies; the surplus is acked,
 * so it leaves the broker.
 */
async function readDeadLetters(
  channel: ConfirmChannel,
  queue: string,
  stored: number,
): Promise<DistinctDeadLetters<GetMessage>> {
  const copies: GetMessage[] = [];
  for (let index = 0; index < stored; index++) {
    const message = await channel.get(queue, { noAck: false });
    if (message === false) break;
    copies.push(message);
  }
  const split = distinctDeadLetters(copies, (message) =>
    deadLetterKey({ id: idOf(message) ?? "", publishedAt: stringHeaders(message)[PUBLISHED_AT_HEADER] }),
  );
  // The broker handles a channel's frames in order, so these acks land before the hand-back that
  // returns the rest (handBackAndClose).
  for (const message of split.surplus) channel.ack(message);
  return split;
}

function idOf(message: Message): string | undefined {
  const header = stringHeaders(message)[Headers.messageId];
  return (
    header ?? (typeof message.properties.messageId === "string" ? message.properties.messageId : undefined)
  );
}

function toDeadLetter(message: Message): DeadLetter {
  const headers = stringHeaders(message);
  const decoded = decodeMessage(message);
  const envelope =
    "error" in decoded
      ? {
          id: idOf(message) ?? "",
          body: message.content.toString("utf8"),
          headers,
          correlationId: idOf(message) ?? "",
          publishedAt: new Date().toISOString(),
        }
      : decoded.envelope;
  return deadLetterFromHeaders(envelope, headers, {
    reason: "unknown",
    deadLetteredAt: envelope.publishedAt,
  });
}
