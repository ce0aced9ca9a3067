import type { Delivery } from "@factflow/protocols";
import { isReseeded } from "../execution/reseed.js";
import { errorInfoOf } from "../lineage/lineage-rows.js";
import type { ExecutionRuntime } from "../runtime.js";
import type { DeliveryVerdict } from "./delivery-ledger.js";

/**
 * What {@link admitDelivery} decided: run the route, acknowledge a duplicate, acknowledge a copy
 * covered by a batch that holds the message (no claim taken), or give up (aborted).
 */
export type Admission = "run" | "duplicate" | "covered" | "aborted";

/**
 * Admits a delivery of `route`: waits while another copy of the same message runs in this process,
 * then decides whether it is a duplicate of a message already settled for good (a broker
 * redelivery after a lost ack, or the same child published again by a re-run parent). On "run" and
 * "duplicate" the caller holds the message's claim and must `release` it on the ledger. A second copy
 * (not a redelivery) of a message parked in a stateful batch here, at the same attempt, does not
 * wait: the batch settles that message, and a waiting copy would hold a handler slot the batch may
 * need to fill ("covered"). Answers
 * synchronously in the common case (no other copy in flight, nothing to read from lineage), so a
 * fresh delivery costs no promise.
 */
export function admitDelivery(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
  providerSignal: AbortSignal,
): Admission | Promise<Admission> {
  const ledger = runtime.deliveries;
  const id = delivery.message.id;
  // Synchronous in the common case (no other copy of the message in flight here).
  if (providerSignal.aborted || runtime.signal.aborted || !ledger.tryClaim(id, NO_SIGNALS))
    return claimThenAdmit(runtime, route, delivery, providerSignal);
  return admitClaimed(runtime, route, delivery);
}

const NO_SIGNALS: readonly AbortSignal[] = [];

/** The slow path: another copy runs here (or a signal aborted): wait for its claim first. */
async function claimThenAdmit(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
  providerSignal: AbortSignal,
): Promise<Admission> {
  // Only a second copy can be covered: a redelivery may be the parked delivery's own message,
  // handed out again because it was lost, and then nothing else carries that message on.
  const claim = await runtime.deliveries.claim(
    delivery.message.id,
    [providerSignal, runtime.signal],
    delivery.redelivered ? undefined : delivery.attempt,
  );
  if (claim === "aborted") return "aborted";
  if (claim === "covered") {
    runtime.deliveries.duplicates++;
    runtime.logger.info("copy of a message held in a batch acknowledged without running the route", {
      route,
      messageId: delivery.message.id,
      attempt: delivery.attempt,
      redelivered: delivery.redelivered,
    });
    return "covered";
  }
  return admitClaimed(runtime, route, delivery);
}

/** Classifies a claimed delivery; a lineage read only for flagged ones the ledger does not know. */
function admitClaimed(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
): Admission | Promise<Admission> {
  const ledger = runtime.deliveries;
  const id = delivery.message.id;
  // A copy re-published by `resume` (or descending from one), and the original of a re-published
  // message, may duplicate a message that already settled, here or in the process that died: they
  // are judged like broker redeliveries.
  const flagged = delivery.redelivered || isReseeded(delivery.message) || runtime.reseeded.has(id);
  // The flag only buys the lineage read below: classifying by it would make an operator's redrive
  // of a re-seeded message (attempt 1, not redelivered) look like a duplicate of its failure.
  const verdict = ledger.classify(id, delivery.attempt, delivery.redelivered);
  // Unknown here but flagged as handed out before: another process (or this one before a restart,
  // or past the ledger's bound) may have settled it. Only flagged deliveries pay the lineage read.
  if (verdict === "fresh" && flagged && !ledger.isSettled(id))
    return lineageVerdict(runtime, route, delivery).then((v) => conclude(runtime, route, delivery, v));
  return conclude(runtime, route, delivery, verdict);
}

function conclude(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
  verdict: DeliveryVerdict,
): Admission {
  const ledger = runtime.deliveries;
  const id = delivery.message.id;
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
