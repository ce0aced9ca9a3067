import type { ManagementClient } from "./management.js";
import type { ArtemisTarget } from "./naming.js";
import { consumeQueue } from "./queue-consumer.js";
import type { StompLink } from "./stomp-link.js";

/**
 * Messages the BROKER gave up on. Artemis' own redelivery bound (`max-delivery-attempts` in
 * `docker/artemis/broker.xml`) counts deliveries left unsettled when a connection drops; once reached,
 * the broker moves the message to its dead-letter address `DLQ`, into the auto-created queue
 * `DLQ.<address>` (filter `_AMQ_ORIG_ADDRESS = '<address>'`). Artemis cannot name that queue after a
 * source queue the way Factflow names `<queue>.dlq` (a dead-letter ADDRESS cannot be templated per
 * source address), so the admin API reads those entries where the broker puts them, by the
 * `_AMQ_ORIG_QUEUE` property Artemis stamps on every dead-lettered message. A topic's subscriptions
 * share one `DLQ.<topic>`; `_AMQ_ORIG_QUEUE` (`<topic>@<sub>`) tells them apart.
 */
export const BROKER_DEAD_LETTER_ADDRESS = "DLQ";

/** `DeadLetter.reason` of a message the broker dead-lettered (no Factflow reason header on it). */
export const BROKER_DEAD_LETTER_REASON = "broker-redelivery-limit";

/** `DeadLetter.lastError` of such a message: what happened, in an operator's words. */
export const BROKER_DEAD_LETTER_ERROR =
  "the broker's redelivery bound (max-delivery-attempts) was reached: its deliveries were repeatedly left unsettled by dropped connections";

/** Property Artemis sets on a dead-lettered message: the queue it was taken from. */
export const ORIGINAL_QUEUE_PROPERTY = "_AMQ_ORIG_QUEUE";

/** One broker-side place dead letters of a Factflow source can be in, and how to pick them out. */
export interface BrokerDeadLetterQueue {
  /** The Artemis queue name (for management). */
  readonly queue: string;
  /** What a SUBSCRIBE names to consume it: the fully qualified `DLQ::<queue>`. */
  readonly subscribeTo: string;
  /** Selector matching this source's entries only. */
  readonly selector: string;
  /** The queue this source's entries were taken from: their `_AMQ_ORIG_QUEUE`. */
  readonly originalQueue: string;
}

/**
 * Where the broker may have put dead letters of the Artemis queue `consumedQueue`: the per-address
 * queue `DLQ.<address>` and, for messages routed before that queue existed or by an older
 * configuration, the catch-all queue `DLQ` itself.
 */
export function brokerDeadLetterQueues(
  target: ArtemisTarget,
  consumedQueue: string,
): readonly BrokerDeadLetterQueue[] {
  const selector = `${ORIGINAL_QUEUE_PROPERTY} = '${consumedQueue.replaceAll("'", "''")}'`;
  return [`${BROKER_DEAD_LETTER_ADDRESS}.${target.address}`, BROKER_DEAD_LETTER_ADDRESS].map((queue) => ({
    queue,
    subscribeTo: `${BROKER_DEAD_LETTER_ADDRESS}::${queue}`,
    selector,
    originalQueue: consumedQueue,
  }));
}

/** What reading a queue needs: the link, its management client and the per-message wait. */
export interface QueueReader {
  readonly link: StompLink;
  readonly management: ManagementClient;
  readonly timeoutMs: number;
}

/**
 * How many of this source's entries `place` holds, counted by reading the queue whole (nothing is
 * acknowledged, so everything goes back when the read ends). Not by the management operation
 * `countMessages(filter)`: Artemis answers it from the first `management-browse-page-size` messages
 * of the queue (200 by default), so it misses every entry after them, and right after a SEND's
 * RECEIPT it may not count that message yet (measured on 2.40: 7 of 1,000 counts).
 */
export async function countBrokerDeadLetters(
  reader: QueueReader,
  place: BrokerDeadLetterQueue,
): Promise<number> {
  await reader.management.flushQueue(place.queue);
  const stored = (await reader.management.queueFigures(place.queue)).messageCount;
  if (stored === 0) return 0;
  let count = 0;
  await consumeQueue(reader.link, reader.timeoutMs, place.subscribeTo, undefined, stored, async (message) => {
    if (message.headers[ORIGINAL_QUEUE_PROPERTY] === place.originalQueue) count += 1;
    return false;
  });
  return count;
}

/** Counts per broker-side queue, in the order of `queues`, read one queue after the other. */
export async function countAllBrokerDeadLetters(
  reader: QueueReader,
  queues: readonly BrokerDeadLetterQueue[],
): Promise<number[]> {
  const counts: number[] = [];
  for (const place of queues) counts.push(await countBrokerDeadLetters(reader, place));
  return counts;
}
