import type { Delivery } from "@factflow/protocols";
import type { DeliveryVerdict } from "./delivery-ledger.js";
import { errorInfoOf } from "./lineage-rows.js";
import { isReseeded } from "./reseed.js";
import type { ExecutionRuntime } from "./runtime.js";

/** What {@link admitDelivery} decided: run the route, acknowledge a duplicate, or give up (aborted). */
export type Admission = "run" | "duplicate" | "aborted";

/**
 * Admits a delivery of `route`: waits while another copy of the same message runs in this process,
 * then decides whether it is a duplicate of a message already settled for good (a broker
 * redelivery after a lost ack, or the same child published again by a re-run parent). On "run" and
 * "duplicate" the caller holds the message's claim and must `release` it on the ledger.
 */
export async function admitDelivery(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
  providerSignal: AbortSignal,
): Promise<Admission> {
  const ledger = runtime.deliveries;
  const id = delivery.message.id;
  if (!(await ledger.claim(id, [providerSignal, runtime.signal]))) return "aborted";
  // A copy re-published by `resume` (or descending from one), and the original of a re-published
  // message, may duplicate a message that already settled, here or in the process that died: they
  // are judged like broker redeliveries.
  const flagged = delivery.redelivered || isReseeded(delivery.message) || runtime.reseeded.has(id);
  // The flag only buys the lineage read below: classifying by it would make an operator's redrive
  // of a re-seeded message (attempt 1, not redelivered) look like a duplicate of its failure.
  let verdict = ledger.classify(id, delivery.attempt, delivery.redelivered);
  // Unknown here but flagged as handed out before: another process (or this one before a restart,
  // or past the ledger's bound) may have settled it. Only flagged deliveries pay the lineage read.
  if (verdict === "fresh" && flagged && ledger.settled(id) === undefined)
    verdict = await lineageVerdict(runtime, route, delivery);
  if (verdict === "fresh") {
    // A redriven dead letter runs again: forget its old failure until it settles anew.
    ledger.reopen(id);
    return "run";
  }
  ledger.duplicates++;
  runtime.logger.info("duplicate delivery acknowledged without re-running the route", {
    route,
    messageId: id,
    attempt: delivery.attempt,
    redelivered: delivery.redelivered,
    settledAs: ledger.settled(id)?.outcome,
  });
  return "duplicate";
}

/** Classifies a redelivery by its committed lineage row (when the store can look one up). */
async function lineageVerdict(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
): Promise<DeliveryVerdict> {
  const { lineage, deliveries, executionId, logger } = runtime;
  if (lineage.messageStatus === undefined) return "fresh";
  const id = delivery.message.id;
  try {
    // This process may have settled it itself with the update still queued (group commit): make
    // that durable first, or a slow commit would pass for "not settled" and run the route again.
    await lineage.flush();
    const row = await lineage.messageStatus(executionId, id);
    if (row?.status !== "completed" && row?.status !== "failed") return "fresh";
    deliveries.settle(id, row.status, row.attempt);
    return deliveries.classify(id, delivery.attempt, delivery.redelivered);
  } catch (error) {
    // At-least-once is the fallback: running it again is safe, skipping it blindly is not.
    logger.warn("could not read the lineage row of a redelivered message; running it again", {
      route,
      messageId: id,
      error: errorInfoOf(error).message,
    });
    return "fresh";
  }
}
