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
  deadLetterFromHeaders,
  deadLetterKey,
  PUBLISHED_AT_HEADER,
  redriveHeaders,
} from "@factflow/provider-kit";
import type { ConfirmChannel, Message, Replies } from "amqplib";
import { classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager } from "./connection-manager.js";
import { deleteRabbitMqDestination } from "./delete-destination.js";
import { decodeMessage, publishOptions, stringHeaders } from "./envelope-codec.js";
import { amqpCopy } from "./failure-router.js";
import { handBack, handBackAndClose } from "./hand-back.js";
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

/**
 * Dead letters a redrive copies, confirms and acknowledges together: the most it holds in memory at
 * once, and the most a crash in the middle can leave both redriven and still dead-lettered.
 */
export const REDRIVE_BATCH = 100;

/** How long a read of a dead-letter queue waits for the next copy before it takes the rest as gone. */
const READ_IDLE_MS = 2_000;

let readProbe: ((body: Buffer) => void) | undefined;

/**
 * Calls `probe` with the body of every dead-letter copy the admin reads from the broker (undefined
 * stops it). Lets a test check how many bodies stay reachable while a dead-letter queue is read.
 */
export function observeDeadLetterReads(probe: ((body: Buffer) => void) | undefined): void {
  readProbe = probe;
}

/**
 * The queue admin API over plain AMQP (no management plugin). Depth and consumers come from a
 * passive declare; dead letters are browsed with `basic.get` on a dedicated channel that is then
 * closed, which puts every fetched message back in its place. Redrive and discard fetch on their
 * own confirm channel, republish (confirmed) and ack, so each count is what the broker did.
 * Operations on one dead-letter queue are serialised within the process.
 *
 * A dead letter stored twice (its copy sent again after a publisher confirm was lost in a connection
 * cut) counts, lists and redrives once: every operation that reads the dead-letter queue reads all
 * of it, keeps the first copy of each dead letter (by `deadLetterKey`) and acks the later copies, so
 * they leave the broker. `dlqDepth` is that count too, so a non-empty dead-letter queue is read
 * whole by `stats`.
 *
 * Reads stream: each copy is fetched with `basic.get`, left unacknowledged at the broker (which
 * keeps it; the channel's close puts it back) and dropped by this process once its identity is
 * noted. Memory is one identity (the message id and publish time, tens of bytes) per dead letter,
 * plus at most one page of bodies for a browse, one body for `redriveOne` / `discardOne` and
 * {@link REDRIVE_BATCH} bodies for a redrive; never the whole queue's bodies. Each read costs one
 * round trip per stored copy.
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
    reads: Reads,
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
      await handBackAndClose(channel, fence, reads.stored - reads.acked);
    }
  }

  /** The dead letters held now, each counted once; surplus copies found on the way are removed. */
  private countDeadLetters(resolved: ResolvedSource): Promise<number> {
    return this.exclusive(resolved.deadLetterQueue, async () => {
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return 0;
      const reads: Reads = { stored, acked: 0 };
      return this.withChannel(
        `counting dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        reads,
        (channel) => streamDeadLetters(channel, resolved.deadLetterQueue, reads, () => {}),
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
      const reads: Reads = { stored, acked: 0 };
      return this.withChannel(
        `browsing dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        reads,
        async (channel) => {
          // Only the page's letters are kept; the others are dropped as soon as they are counted.
          const items: DeadLetter[] = [];
          const total = await streamDeadLetters(
            channel,
            resolved.deadLetterQueue,
            reads,
            (message, index) => {
              if (index >= offset && index < offset + limit) items.push(toDeadLetter(message));
            },
          );
          return { total, offset, items };
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
      const reads: Reads = { stored, acked: 0 };
      return this.withChannel(
        `redriving dead letters of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        reads,
        async (channel, returned) => {
          // First pass: surplus copies leave the broker before anything is redriven, so a crash
          // later cannot leave a second copy of a letter already moved.
          const letters = await streamDeadLetters(channel, resolved.deadLetterQueue, reads, () => {});
          await handBack(channel, resolved.deadLetterQueue, stored - reads.acked);
          // Second pass, batch by batch: copy, wait for the confirms, then ack the batch. A crash
          // leaves the unacked batch in the dead-letter queue as well: at most one batch twice.
          const moved = new Set<string>();
          let redriven = 0;
          let fetched = 0;
          const puller = await pull(channel, resolved.deadLetterQueue, REDRIVE_BATCH);
          while (redriven < letters && fetched < stored) {
            const batch: Message[] = [];
            while (batch.length < REDRIVE_BATCH && redriven + batch.length < letters && fetched < stored) {
              const message = await puller.next();
              if (message === undefined) break;
              fetched += 1;
              readProbe?.(message.content);
              const key = keyOf(message);
              // A copy stored again since the first pass.
              if (moved.has(key)) {
                channel.ack(message);
                reads.acked += 1;
              } else {
                moved.add(key);
                batch.push(message);
                this.republish(channel, resolved.sourceQueue, message);
              }
            }
            if (batch.length === 0) break;
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
              reads.acked += 1;
            }
            redriven += batch.length;
          }
          await puller.cancel();
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
    before: (channel: ConfirmChannel, message: Message, returned: Set<string>) => Promise<void>,
  ): Promise<boolean> {
    return this.exclusive(resolved.deadLetterQueue, async () => {
      const stored = (await this.deps.topology.check(resolved.deadLetterQueue))?.messageCount ?? 0;
      if (stored === 0) return false;
      const reads: Reads = { stored, acked: 0 };
      return this.withChannel(
        `${verb} dead letter "${messageId}" of "${resolved.describe}"`,
        resolved.deadLetterQueue,
        reads,
        async (channel, returned) => {
          // Read to the end, so later copies of the letter are removed too; only the match is kept.
          let message: Message | undefined;
          await streamDeadLetters(channel, resolved.deadLetterQueue, reads, (letter) => {
            if (message === undefined && idOf(letter) === messageId) message = letter;
          });
          if (message === undefined) return false;
          await before(channel, message, returned);
          channel.ack(message);
          reads.acked += 1;
          // The ack must reach the broker before the channel closes and requeues the rest.
          await channel.waitForConfirms();
          return true;
        },
      );
    });
  }
}

/**
 * One read of a dead-letter queue: the copies it held when the read began (`stored`, the most it
 * fetches) and how many of them it acknowledged, so the hand-back can wait until the rest are
 * ready again.
 */
interface Reads {
  readonly stored: number;
  acked: number;
}

/**
 * Reads up to `reads.stored` copies of the dead-letter queue through a consumer without a prefetch
 * limit (each copy stays unacked on `channel`, so it goes back when the channel closes), and hands
 * the first copy of each dead letter to `visit`, synchronously, with its position among the letters;
 * later copies are acked, so they leave the broker. A consumer streams where `basic.get` costs one
 * round trip per copy, and since every copy is handled as its frame is parsed, nothing accumulates:
 * the process keeps only the identities seen and whatever `visit` keeps. Stops once `reads.stored`
 * copies came, or when none came for {@link READ_IDLE_MS} (another reader holds the rest). Answers
 * the number of dead letters.
 */
async function streamDeadLetters(
  channel: ConfirmChannel,
  queue: string,
  reads: Reads,
  visit: (message: Message, index: number) => void,
): Promise<number> {
  const seen = new Set<string>();
  if (reads.stored === 0) return 0;
  let read = 0;
  let consuming: Promise<Replies.Consume> | undefined;
  await new Promise<void>((resolve, reject) => {
    let idle: ReturnType<typeof setTimeout> | undefined;
    const finish = (error?: Error) => {
      clearTimeout(idle);
      channel.off("close", onClose);
      if (error === undefined) resolve();
      else reject(error);
    };
    const onClose = () => finish(new Error(`the channel closed while reading "${queue}"`));
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => finish(), READ_IDLE_MS);
    };
    channel.on("close", onClose);
    arm();
    consuming = channel.consume(
      queue,
      (message) => {
        if (message === null) return finish(new Error(`the broker cancelled the read of "${queue}"`));
        // Copies beyond the count (arrived during the read) stay unacked and go back with the rest.
        if (read >= reads.stored) return;
        read += 1;
        readProbe?.(message.content);
        const key = keyOf(message);
        // The broker handles a channel's frames in order, so this ack lands before the hand-back
        // that returns the rest (handBackAndClose).
        if (seen.has(key)) {
          channel.ack(message);
          reads.acked += 1;
        } else {
          visit(message, seen.size);
          seen.add(key);
        }
        if (read >= reads.stored) finish();
        else arm();
      },
      { noAck: false },
    );
    consuming.catch((error: unknown) => finish(error instanceof Error ? error : new Error(String(error))));
  });
  // Cancelled before anything else runs on the channel, so nothing handed back is delivered again.
  if (consuming !== undefined) await channel.cancel((await consuming).consumerTag);
  return seen.size;
}

/**
 * A consumer on `queue` with a prefetch of `window`, read one copy at a time: the broker sends no
 * more than `window` unacknowledged copies, so no more than that wait here. `next` answers undefined
 * when nothing came for {@link READ_IDLE_MS}.
 */
async function pull(
  channel: ConfirmChannel,
  queue: string,
  window: number,
): Promise<{ next(): Promise<Message | undefined>; cancel(): Promise<void> }> {
  const arrived: Message[] = [];
  let ended: Error | undefined;
  let wake: (() => void) | undefined;
  const end = (error: Error) => {
    ended ??= error;
    wake?.();
  };
  const onClose = () => end(new Error(`the channel closed while reading "${queue}"`));
  channel.on("close", onClose);
  await channel.prefetch(window);
  const { consumerTag } = await channel.consume(
    queue,
    (message) => {
      if (message === null) end(new Error(`the broker cancelled the read of "${queue}"`));
      else arrived.push(message);
      wake?.();
    },
    { noAck: false },
  );
  return {
    async next() {
      if (arrived.length === 0 && ended === undefined) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, READ_IDLE_MS);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
      const message = arrived.shift();
      if (message === undefined && ended !== undefined) throw ended;
      return message;
    },
    async cancel() {
      channel.off("close", onClose);
      await channel.cancel(consumerTag);
    },
  };
}

function keyOf(message: Message): string {
  return deadLetterKey({ id: idOf(message) ?? "", publishedAt: stringHeaders(message)[PUBLISHED_AT_HEADER] });
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
