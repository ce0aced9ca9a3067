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
import type { IMessage } from "@stomp/stompjs";
import {
  BROKER_DEAD_LETTER_ADDRESS,
  BROKER_DEAD_LETTER_ERROR,
  BROKER_DEAD_LETTER_REASON,
  type BrokerDeadLetterQueue,
  brokerDeadLetterQueues,
  countBrokerDeadLetters,
  ORIGINAL_QUEUE_PROPERTY,
} from "./broker-dead-letters.js";
import type { ArtemisConfig } from "./config.js";
import { deleteArtemisDestination } from "./delete-destination.js";
import { DLQ_ID_HEADER, decodeMessage, sendHeaders } from "./envelope-codec.js";
import { type ManagementClient, type QueueFigures, ResourceNotFound } from "./management.js";
import {
  type ArtemisTarget,
  checkSubscriptionName,
  consumedQueueName,
  deadLetterQueueName,
  queueFromArtemis,
  resolveDestination,
  subscribeDestination,
  subscriptionFromArtemis,
} from "./naming.js";
import { consumeQueue } from "./queue-consumer.js";

export { observeQueueReads as observeDeadLetterReads } from "./queue-consumer.js";

/**
 * Bytes of dead letters the broker sends a redrive ahead of its acknowledgements
 * (`consumer-window-size`): the most a redrive holds at once, plus one message.
 */
export const REDRIVE_WINDOW_BYTES = 1 << 20;

import type { StompLink } from "./stomp-link.js";

/** What the admin API needs from its provider. */
export interface AdminDeps {
  readonly link: StompLink;
  readonly management: ManagementClient;
  readonly config: ArtemisConfig;
  /** Deliveries this provider holds for `queue` that no handler has started yet. */
  readonly buffered: (queue: string) => number;
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/**
 * The queue admin API over Artemis. Figures come from Artemis management operations invoked over
 * STOMP (see {@link ManagementClient}); dead letters are read by consuming the dead-letter queue
 * without acknowledging and then closing the consumer, which returns every message in its original
 * order (browse), and are moved or deleted by consuming the queue and acknowledging a letter only
 * after its redriven copy has a RECEIPT. Admin operations of one provider run one
 * at a time. Factflow's own dead letters are never counted with the management operation
 * `countMessages(filter)`, which Artemis answers from the first `management-browse-page-size`
 * messages only (see `broker-dead-letters.ts`): a letter is found by reading its queue, so one behind
 * 200 others is found too.
 *
 * Dead letters include the ones the broker itself moved to `DLQ.<address>` after its redelivery bound
 * (see `broker-dead-letters.ts`): counted in `dlqDepth`, listed after Factflow's own (reason
 * `broker-redelivery-limit`), and redriven or discarded like them.
 *
 * A dead letter of Factflow's own stored twice (its copy sent again after a RECEIPT was lost in a
 * connection cut) counts, lists and redrives once: every operation that reads the dead-letter queue
 * keeps the first copy of each dead letter (by `deadLetterKey`) and acknowledges the later ones, so
 * they leave the broker. `dlqDepth` is that count too, so a non-empty dead-letter queue is read
 * whole by `stats`.
 */
export class ArtemisAdmin implements QueueAdminProtocol {
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: AdminDeps) {}

  async listDestinations(): Promise<readonly DestinationInfo[]> {
    const [anycast, multicast] = await Promise.all([
      this.deps.management.invoke("broker", "getQueueNames", ["ANYCAST"]),
      this.deps.management.invoke("broker", "getQueueNames", ["MULTICAST"]),
    ]);
    const out: DestinationInfo[] = [];
    for (const name of Array.isArray(anycast) ? anycast : []) {
      const destination = queueFromArtemis(String(name));
      if (destination !== undefined) out.push({ destination, kind: "queue" });
    }
    const topics = new Map<string, string[]>();
    for (const name of Array.isArray(multicast) ? multicast : []) {
      const parsed = subscriptionFromArtemis(String(name));
      if (parsed === undefined) continue;
      const list = topics.get(parsed.topic) ?? [];
      list.push(parsed.subscription);
      topics.set(parsed.topic, list);
    }
    for (const [destination, subscriptions] of topics)
      out.push({ destination, kind: "topic", subscriptions });
    return out;
  }

  async stats(source: DeadLetterSource): Promise<DestinationStats> {
    const { target, queue, dlq, broker } = this.resolve(source);
    // Flushed first, so a message whose RECEIPT came before this call is counted.
    await Promise.all([this.deps.management.flushQueue(queue), this.deps.management.flushQueue(dlq)]);
    const [figures, dlqFigures, brokerCounts] = await Promise.all([
      this.deps.management.queueFigures(queue),
      this.deps.management.queueFigures(dlq),
      countBrokerDeadLetters(this.deps.management, broker),
    ]);
    const own = dlqFigures.messageCount === 0 ? 0 : await this.countOwnDeadLetters(dlq);
    // Dead letters the broker moved on its own count too: they are as recoverable as Factflow's.
    const dlqDepth = own + sum(brokerCounts);
    return {
      destination: target.destination,
      ...(source.subscription === undefined ? {} : { subscription: source.subscription }),
      ...depthAndInFlight(figures, this.deps.buffered(queue)),
      consumers: figures.consumerCount,
      dlqDepth,
      stranded: Math.max(0, figures.deliveringCount - figures.heldCount),
    };
  }

  browseDeadLetters(
    source: DeadLetterSource,
    page: { offset: number; limit: number },
  ): Promise<DeadLetterPage> {
    const { offset, limit } = page;
    if (!Number.isInteger(offset) || offset < 0 || !Number.isInteger(limit) || limit < 0) {
      throw new ProviderError(
        "artemis",
        "invalid-input",
        "browseDeadLetters needs an integer offset >= 0 and limit >= 0",
        {
          code: "invalid_argument",
        },
      );
    }
    return this.serial(async () => {
      const { dlq, broker } = this.resolve(source);
      // Only the page is kept: the letters before it are counted and dropped as they are read.
      const items: DeadLetter[] = [];
      const own = await this.ownDeadLetters(dlq, async (message, index) => {
        if (index >= offset && index < offset + limit) items.push(toDeadLetter(message));
        return false;
      });
      const brokerCounts = await countBrokerDeadLetters(this.deps.management, broker);
      const total = own + sum(brokerCounts);
      const end = Math.min(total, offset + limit);
      let index = own;
      const timeoutMs = this.deps.config.adminTimeoutMs;
      // Factflow's own dead letters first, then the broker's, each in queue order.
      for (const [i, place] of broker.entries()) {
        if (index >= end) break;
        // An empty place (often `DLQ.<address>`, which the broker makes on its first dead letter)
        // is skipped, not taken for the end: the catch-all `DLQ` after it may hold letters.
        const wanted = Math.min(brokerCounts[i] ?? 0, end - index);
        if (wanted === 0) continue;
        await consumeQueue(
          this.deps.link,
          timeoutMs,
          place.subscribeTo,
          place.selector,
          wanted,
          async (message) => {
            if (index >= offset) items.push(toDeadLetter(message));
            index += 1;
            return false;
          },
        );
      }
      return { total, offset, items };
    });
  }

  /**
   * Factflow's dead letters in `dlq`, each counted once. The queue is read through a consumer that
   * acknowledges nothing but surplus copies and keeps no message: the broker's management listing
   * (`listMessages`) would be cheaper but stops at the address's `management-browse-page-size`
   * (200 by default), so it undercounts a larger dead-letter queue; so does `countMessages` grouped
   * by the id property (measured on 2.40: 200 groups' worth of 2,001 messages).
   */
  private countOwnDeadLetters(dlq: string): Promise<number> {
    return this.serial(() => this.ownDeadLetters(dlq, async () => false));
  }

  /**
   * Reads Factflow's dead letters in `dlq`, the whole queue, in queue order and
   * hands the first copy of each to `settle` with its position among the letters; `settle` decides
   * whether that copy is acknowledged. Later copies of a dead letter are acknowledged, so they leave
   * the broker. Keeps only the identities seen; answers the number of dead letters. `windowBytes`
   * bounds what the broker sends ahead (see {@link consumeQueue}); only a read that acknowledges
   * what it moves may set it.
   */
  private async ownDeadLetters(
    dlq: string,
    settle: (message: IMessage, index: number) => Promise<boolean>,
    windowBytes?: number,
  ): Promise<number> {
    await this.deps.management.flushQueue(dlq);
    const stored = (await this.deps.management.queueFigures(dlq)).messageCount;
    if (stored === 0) return 0;
    const keys = new Set<string>();
    await consumeQueue(
      this.deps.link,
      this.deps.config.adminTimeoutMs,
      dlq,
      undefined,
      stored,
      async (message) => {
        const key = keyOf(message.headers);
        if (keys.has(key)) return true;
        keys.add(key);
        return settle(message, keys.size - 1);
      },
      windowBytes,
    );
    return keys.size;
  }

  redriveAll(source: DeadLetterSource): Promise<{ redriven: number }> {
    return this.serial(async () => {
      const { target, dlq, broker } = this.resolve(source);
      const redrive = (message: IMessage) => this.redrive(target, source, message);
      const timeoutMs = this.deps.config.adminTimeoutMs;
      // Each letter is copied, its copy confirmed (RECEIPT), then acknowledged: a crash leaves at most
      // one letter both redriven and still dead-lettered. The window keeps the broker from sending
      // the whole queue ahead of the acknowledgements.
      let redriven = await this.ownDeadLetters(dlq, redrive, REDRIVE_WINDOW_BYTES);
      const brokerCounts = await countBrokerDeadLetters(this.deps.management, broker);
      for (const [i, place] of broker.entries()) {
        const count = brokerCounts[i] ?? 0;
        if (count > 0)
          redriven += await consumeQueue(
            this.deps.link,
            timeoutMs,
            place.subscribeTo,
            place.selector,
            count,
            redrive,
            REDRIVE_WINDOW_BYTES,
          );
      }
      return { redriven };
    });
  }

  redriveOne(source: DeadLetterSource, messageId: string): Promise<{ redriven: boolean }> {
    return this.serial(async () => {
      const { target, dlq, broker } = this.resolve(source);
      const redrive = (message: IMessage) => this.redrive(target, source, message);
      const own = await this.takeOwn(dlq, messageId, redrive);
      if (own !== undefined) return { redriven: own };
      return { redriven: await this.settleBrokerOne(broker, messageId, redrive) };
    });
  }

  discardOne(source: DeadLetterSource, messageId: string): Promise<{ discarded: boolean }> {
    return this.serial(async () => {
      const { dlq, broker } = this.resolve(source);
      const own = await this.takeOwn(dlq, messageId, async () => true);
      if (own !== undefined) return { discarded: own };
      return { discarded: await this.settleBrokerOne(broker, messageId, async () => true) };
    });
  }

  /**
   * Settles the first of Factflow's dead letters with id `messageId` (its surplus copies go too);
   * undefined when `dlq` holds none. Reads the whole queue rather than consuming with a selector on
   * the id: a selector consumer cannot tell that no further match will come, and the one count that
   * could tell it, `countMessages(filter)`, misses letters (see `broker-dead-letters.ts`). Only the
   * match waits on the network (its redrive's RECEIPT); every other letter is visited at once.
   */
  private async takeOwn(
    dlq: string,
    messageId: string,
    settle: (message: IMessage) => Promise<boolean>,
  ): Promise<boolean | undefined> {
    let found = false;
    let done = false;
    await this.ownDeadLetters(dlq, async (message) => {
      if (found || idOf(message.headers) !== messageId) return false;
      found = true;
      done = await settle(message);
      return done;
    });
    return found ? done : undefined;
  }

  /**
   * Deletes a destination's Artemis queues, messages included: the queue and its dead letters, or
   * every subscription queue of a topic with theirs. For tests and tooling.
   */
  async destroy(destination: string): Promise<void> {
    const target = resolveDestination(destination);
    const names: string[] = [];
    // The broker's own dead letters of this address (`DLQ.<address>`) go with it.
    names.push(`${BROKER_DEAD_LETTER_ADDRESS}.${target.address}`);
    if (target.kind === "queue") names.push(target.address, deadLetterQueueName(target));
    else {
      const listed = await this.listDestinations();
      const topic = listed.find((d) => d.destination === target.destination);
      for (const subscription of topic?.subscriptions ?? [])
        names.push(consumedQueueName(target, subscription), deadLetterQueueName(target, subscription));
    }
    // ...and so do its entries in the broker's catch-all dead-letter queue.
    try {
      const filter = `_AMQ_ORIG_ADDRESS = '${target.address.replaceAll("'", "''")}'`;
      await this.deps.management.invoke(`queue.${BROKER_DEAD_LETTER_ADDRESS}`, "removeMessages", [filter]);
    } catch (error) {
      if (!(error instanceof ResourceNotFound)) throw error;
    }
    for (const name of names) {
      try {
        await this.deps.management.invoke("broker", "destroyQueue", [name, true, true]);
      } catch (error) {
        if (!(error instanceof ResourceNotFound) && !/AMQ229017|does not exist/.test(String(error)))
          throw error;
      }
    }
  }

  /** Deletes the queue (or subscription queue) and its dead-letter queue unless it holds letters to keep. */
  deleteDestination(
    source: DeadLetterSource,
    options: DeleteDestinationOptions = {},
  ): Promise<DeleteDestinationResult> {
    return this.serial(async () => {
      const { target, queue, dlq } = this.resolve(source);
      const describe =
        source.subscription === undefined
          ? target.destination
          : `${target.destination} (subscription ${source.subscription})`;
      return deleteArtemisDestination(
        this.deps.management,
        { describe, queue, dlq, isSubscription: target.kind === "topic" },
        options,
      );
    });
  }

  /**
   * `removeMessages` with no filter on the queue: what waits goes, and so do deliveries the broker
   * has scheduled on it (retries waiting out their backoff); deliveries a consumer holds stay.
   */
  async purgeDestination(source: DeadLetterSource): Promise<PurgeDestinationResult> {
    const { target, queue } = this.resolve(source);
    await this.deps.management.flushQueue(queue);
    if (!(await this.deps.management.queueFigures(queue)).exists)
      return { purged: 0, reason: `${target.destination} does not exist` };
    const removed = await this.deps.management.invoke(`queue.${queue}`, "removeMessages", [""]);
    return { purged: Number(removed) || 0 };
  }

  private resolve(source: DeadLetterSource): {
    target: ArtemisTarget;
    queue: string;
    dlq: string;
    broker: readonly BrokerDeadLetterQueue[];
  } {
    const target = resolveDestination(source.destination);
    if (target.kind === "topic") {
      if (source.subscription === undefined) {
        throw new ProviderError(
          "artemis",
          "invalid-input",
          `"${source.destination}" is a topic: its figures and dead letters are per subscription; pass { subscription }`,
          { code: "invalid_argument" },
        );
      }
      checkSubscriptionName(source.destination, source.subscription);
    }
    const subscription = source.subscription ?? "";
    const queue = consumedQueueName(target, subscription);
    return {
      target,
      queue,
      dlq: deadLetterQueueName(target, subscription),
      broker: brokerDeadLetterQueues(target, queue),
    };
  }

  /**
   * Settles (redrives or discards) the one broker-side dead letter whose Factflow id is `messageId`.
   * Those messages carry no selector-friendly id (the broker moved them as they were, and selectors
   * cannot name `x-message-id`), so this source's entries are read in order and only the match is
   * acknowledged; the others go back when the consumer closes, which does not count a delivery.
   */
  private async settleBrokerOne(
    broker: readonly BrokerDeadLetterQueue[],
    messageId: string,
    settle: (message: IMessage) => Promise<boolean>,
  ): Promise<boolean> {
    const counts = await countBrokerDeadLetters(this.deps.management, broker);
    for (const [i, place] of broker.entries()) {
      const count = counts[i] ?? 0;
      if (count === 0) continue;
      let done = false;
      const settled = await consumeQueue(
        this.deps.link,
        this.deps.config.adminTimeoutMs,
        place.subscribeTo,
        place.selector,
        count,
        async (message) => {
          if (done || decodeMessage(message.headers, message.body).envelope.id !== messageId) return false;
          done = await settle(message);
          return done;
        },
      );
      if (settled > 0) return true;
    }
    return false;
  }

  /** Republishes one dead letter to its source with a fresh budget; resolves true once it has a RECEIPT. */
  private async redrive(
    target: ArtemisTarget,
    source: DeadLetterSource,
    message: IMessage,
  ): Promise<boolean> {
    const { envelope } = decodeMessage(message.headers, message.body);
    const headers = sendHeaders(
      {
        headers: redriveHeaders(envelope.headers),
        delayMs: 0,
        ...(envelope.priority === undefined ? {} : { priority: envelope.priority }),
      },
      target.kind === "queue" ? "ANYCAST" : "MULTICAST",
    );
    const destination =
      target.kind === "queue" ? target.address : subscribeDestination(target, source.subscription ?? "");
    await this.deps.link.send(
      destination,
      headers,
      message.body,
      `redrive ${envelope.id} to "${target.destination}"`,
    );
    return true;
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/**
 * Waiting and in-flight figures of a queue. Artemis counts what sits in a consumer's window as
 * delivering; deliveries no handler of this provider has started yet (`buffered`) are still waiting
 * as far as Factflow is concerned. Only deliveries a live consumer holds count: a delivery Artemis
 * stranded (counted delivering, held by no consumer, not redelivered; see `QueueFigures`) is
 * neither waiting nor in flight, so it cannot make an execution look busy for ever (the cluster
 * takeover re-publishes the message it stood for).
 */
export function depthAndInFlight(
  figures: Pick<QueueFigures, "messageCount" | "deliveringCount" | "heldCount">,
  buffered: number,
): { depth: number; inFlight: number } {
  const held = Math.max(0, Math.min(figures.deliveringCount, figures.heldCount));
  // Waiting and scheduled: everything the queue counts that is not delivering.
  const ready = Math.max(0, figures.messageCount - figures.deliveringCount);
  const inFlight = Math.max(0, held - buffered);
  return { depth: ready + held - inFlight, inFlight };
}

/** The Factflow message id of a stored dead letter, read from its STOMP headers or properties. */
function idOf(headers: Readonly<Record<string, string>>): string {
  return headers[DLQ_ID_HEADER] ?? headers[Headers.messageId] ?? headers["message-id"] ?? "";
}

/** The identity of a stored dead letter (`deadLetterKey`), read from its STOMP headers or properties. */
function keyOf(headers: Readonly<Record<string, string>>): string {
  return deadLetterKey({ id: idOf(headers), publishedAt: headers[PUBLISHED_AT_HEADER] });
}

function toDeadLetter(message: IMessage): DeadLetter {
  const { envelope } = decodeMessage(message.headers, message.body);
  const headers = envelope.headers;
  // Moved by the broker's redelivery bound, not by Factflow: no Factflow reason header on it.
  const byBroker =
    headers[Headers.deadLetterReason] === undefined && message.headers[ORIGINAL_QUEUE_PROPERTY] !== undefined;
  const letter = deadLetterFromHeaders(envelope, headers, {
    reason: byBroker ? BROKER_DEAD_LETTER_REASON : "unknown",
    deadLetteredAt: envelope.publishedAt,
  });
  return byBroker ? { ...letter, lastError: BROKER_DEAD_LETTER_ERROR } : letter;
}
