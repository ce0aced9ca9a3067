import type { ManagementClient } from "./management.js";
import { ResourceNotFound } from "./management.js";
import type { ArtemisTarget } from "./naming.js";

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
  }));
}

/**
 * How many messages of `queue` match `selector`; 0 when the queue does not exist. From the
 * management operation `countMessages(filter)`, which looks at the first `management-browse-page-size`
 * messages of the queue only (200 by default), after a flush of the queue so a message just stored
 * is counted. Reading the broker's shared `DLQ` whole instead would be exact, but every `stats` of
 * every source would then hold all of its messages for a moment, hiding them from the other readers.
 */
export async function countMatching(
  management: ManagementClient,
  queue: string,
  selector: string,
): Promise<number> {
  await management.flushQueue(queue);
  try {
    const n = Number(await management.invoke(`queue.${queue}`, "countMessages", [selector]));
    return Number.isFinite(n) ? n : 0;
  } catch (error) {
    if (error instanceof ResourceNotFound) return 0;
    throw error;
  }
}

/** Counts per broker-side queue, in the order of `queues`. */
export function countBrokerDeadLetters(
  management: ManagementClient,
  queues: readonly BrokerDeadLetterQueue[],
): Promise<number[]> {
  return Promise.all(queues.map((q) => countMatching(management, q.queue, q.selector)));
}
