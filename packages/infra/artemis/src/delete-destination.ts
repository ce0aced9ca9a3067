import type { DeleteDestinationOptions, DeleteDestinationResult } from "@factflow/protocols";
import type { ManagementClient } from "./management.js";

/** The Artemis queues behind one Factflow queue or topic subscription. */
export interface DeletionTarget {
  readonly describe: string;
  /** The anycast queue, or the multicast subscription queue of a topic. */
  readonly queue: string;
  readonly dlq: string;
  /** True for a topic subscription: its address is the topic, shared with other subscriptions. */
  readonly isSubscription: boolean;
}

/**
 * Deletes a queue and, unless it holds dead letters to keep, its dead-letter queue, with the
 * management `destroyQueue` operation (which also removes an address left without queues).
 * Retries on Artemis are scheduled messages in the queue itself, so there is no holding queue to
 * remove. Management has no "if empty" flag: the emptiness check and the destroy are two calls, and
 * Artemis itself refuses to destroy a queue that has consumers. Each count follows a flush of the
 * queue (see `ManagementClient.flushQueue`), so a message or dead letter whose RECEIPT came before
 * this call is counted: without it, `ifEmpty` could destroy a queue with a confirmed message in it.
 */
export async function deleteArtemisDestination(
  management: ManagementClient,
  target: DeletionTarget,
  options: DeleteDestinationOptions,
): Promise<DeleteDestinationResult> {
  const { describe, queue, dlq } = target;
  const keep = options.keepDeadLetters !== false;
  await management.flushQueue(queue);
  const main = await management.queueFigures(queue);
  if (!main.exists) {
    // The source may be gone already with its dead letters kept: dropping them is still possible.
    if (!keep && (await management.destroyQueue(dlq, true))) return { deleted: true, deadLettersKept: 0 };
    return { deleted: false, reason: `${describe}: queue "${queue}" does not exist` };
  }
  if (main.consumerCount > 0) {
    return {
      deleted: false,
      reason: `${describe} has ${main.consumerCount} consumer(s) attached; unsubscribe them first`,
    };
  }
  // Artemis counts scheduled retries and delivering messages in messageCount.
  if (options.ifEmpty === true && (main.messageCount > 0 || main.deliveringCount > 0)) {
    return {
      deleted: false,
      reason: `${describe} is not empty: ${main.messageCount} message(s) waiting or scheduled, ${main.deliveringCount} in flight`,
    };
  }
  if (!(await management.destroyQueue(queue, !target.isSubscription))) {
    return { deleted: false, reason: `${describe}: queue "${queue}" does not exist` };
  }
  await management.flushQueue(dlq);
  const dead = await management.queueFigures(dlq);
  if (!dead.exists) return { deleted: true, deadLettersKept: 0 };
  if (keep && dead.messageCount > 0) {
    return {
      deleted: true,
      reason: `${dead.messageCount} dead letter(s) kept in "${dlq}"; browse, redrive or discard them through the admin API`,
      deadLettersKept: dead.messageCount,
    };
  }
  await management.destroyQueue(dlq, true);
  return { deleted: true, deadLettersKept: 0 };
}
