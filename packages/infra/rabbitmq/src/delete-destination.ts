import {
  DEFAULT_RETRY_POLICY,
  type DeleteDestinationOptions,
  type DeleteDestinationResult,
  retryDelayMs,
} from "@factflow/protocols";
import { amqpReplyCode, classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import { retryQueueName } from "./naming.js";
import type { Topology } from "./topology.js";

/** A queue (or topic subscription queue) to delete, with its dead-letter queue. */
export interface DeletionTarget {
  readonly describe: string;
  readonly sourceQueue: string;
  readonly deadLetterQueue: string;
}

/** Retries deeper than this are not probed for holding queues (they expire on their own anyway). */
const PROBED_ATTEMPTS = 8;

/**
 * Holding queues that may exist for `sourceQueue`: every one this process declared, plus those of
 * the default retry policy (declared by any process). AMQP cannot list queues, so holding queues of
 * other policies declared elsewhere are left to their `x-expires` lease.
 */
function holdingCandidates(topology: Topology, sourceQueue: string): string[] {
  const names = new Set<string>();
  for (const name of topology.declaredQueues) if (name.startsWith(`${sourceQueue}:retry.`)) names.add(name);
  for (let attempt = 2; attempt <= PROBED_ATTEMPTS; attempt++) {
    names.add(retryQueueName(sourceQueue, retryDelayMs(DEFAULT_RETRY_POLICY, attempt)));
  }
  return [...names];
}

/** `queue.delete` with flags; false when the broker refused on if-empty / if-unused (406). */
async function removeQueue(
  topology: Topology,
  config: RabbitMqConfig,
  describe: string,
  name: string,
  flags: { ifEmpty?: boolean; ifUnused?: boolean },
): Promise<boolean> {
  try {
    await topology.run(`delete queue "${name}"`, (ch) => ch.deleteQueue(name, flags));
  } catch (error) {
    if (amqpReplyCode(error) === 406) return false;
    throw classifyAmqpError(error, `deleting queue "${name}" of ${describe}`, config.url);
  }
  topology.forgetQueue(name);
  topology.declaredQueues.delete(name);
  return true;
}

/**
 * Deletes a queue, its retry holding queues and (unless it holds dead letters to keep) its
 * dead-letter queue. The checks up front give a readable reason; the `if-unused` / `if-empty` flags
 * on `queue.delete` make the broker itself refuse when a consumer or a message arrived in between.
 */
export async function deleteRabbitMqDestination(
  topology: Topology,
  config: RabbitMqConfig,
  target: DeletionTarget,
  inFlight: number,
  options: DeleteDestinationOptions,
): Promise<DeleteDestinationResult> {
  const { describe, sourceQueue, deadLetterQueue } = target;
  const ifEmpty = options.ifEmpty === true;
  const keep = options.keepDeadLetters !== false;
  const main = await topology.check(sourceQueue);
  if (main === undefined) {
    // The source may be gone already with its dead letters kept: dropping them is still possible.
    if (!keep && (await topology.check(deadLetterQueue)) !== undefined) {
      return {
        deleted: await removeQueue(topology, config, describe, deadLetterQueue, {}),
        deadLettersKept: 0,
      };
    }
    return { deleted: false, reason: `${describe}: queue "${sourceQueue}" does not exist` };
  }
  if (main.consumerCount > 0) {
    return {
      deleted: false,
      reason: `${describe} has ${main.consumerCount} consumer(s) attached; unsubscribe them first`,
    };
  }
  const holding: { name: string; count: number }[] = [];
  for (const name of holdingCandidates(topology, sourceQueue)) {
    const counts = await topology.check(name);
    if (counts !== undefined) holding.push({ name, count: counts.messageCount });
  }
  const scheduled = holding.reduce((sum, h) => sum + h.count, 0);
  if (ifEmpty && (main.messageCount > 0 || scheduled > 0 || inFlight > 0)) {
    return {
      deleted: false,
      reason: `${describe} is not empty: ${main.messageCount} message(s) waiting, ${scheduled} awaiting a retry, ${inFlight} in flight`,
    };
  }

  const remove = (name: string, flags: { ifEmpty?: boolean; ifUnused?: boolean }) =>
    removeQueue(topology, config, describe, name, flags);

  // Holding queues first: once the source is gone their expiring messages would be dropped anyway,
  // and deleting them before the source keeps a refusal from leaving a half-deleted destination.
  for (const h of holding) {
    if (!(await remove(h.name, { ifEmpty }))) {
      return { deleted: false, reason: `${describe}: a retry arrived in "${h.name}" meanwhile` };
    }
  }
  if (!(await remove(sourceQueue, { ifEmpty, ifUnused: true }))) {
    return { deleted: false, reason: `${describe}: a consumer or a message arrived meanwhile` };
  }

  const dlq = await topology.check(deadLetterQueue);
  if (dlq === undefined) return { deleted: true, deadLettersKept: 0 };
  // if-empty on the DLQ too: a dead letter that lands between the check and the delete survives.
  if (!(keep && dlq.messageCount > 0) && (await remove(deadLetterQueue, { ifEmpty: keep }))) {
    return { deleted: true, deadLettersKept: 0 };
  }
  const kept = (await topology.check(deadLetterQueue))?.messageCount ?? 0;
  return {
    deleted: true,
    reason: `${kept} dead letter(s) kept in "${deadLetterQueue}"; browse, redrive or discard them through the admin API`,
    deadLettersKept: kept,
  };
}
