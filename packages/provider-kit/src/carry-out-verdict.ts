import type { DurabilityCounters, Logger, ProviderError } from "@factflow/protocols";
import { type DeadLetterOrigin, deadLetterHeaders, retryHeaders } from "./failure-headers.js";
import type { SettlementVerdict } from "./settlement.js";
import { pauseAfterCopyFailure, type SettledIdentity, type SettlementReport } from "./settlement-report.js";
import type { CopyOutcome, SettlementCopy, SubscriptionPort } from "./subscription-port.js";

/**
 * How many times a retry or dead-letter copy is published while the broker answers with a retryable
 * error other than a timeout. A copy whose confirmation timed out is not sent again: it may still
 * arrive, and a second one would be a second duplicate.
 */
const COPY_ATTEMPTS = 3;

/** What carrying out a verdict needs of its subscription. */
export interface VerdictContext<D> {
  readonly port: SubscriptionPort<D>;
  readonly counters: DurabilityCounters;
  readonly report: SettlementReport;
  readonly origin: DeadLetterOrigin;
  readonly logger: Logger | undefined;
  /** True once the subscription stops: a failed copy is then not tried again. */
  readonly stopping: () => boolean;
}

/** One delivery's verdict and what it is reported as. */
interface VerdictOf {
  readonly verdict: SettlementVerdict;
  /** The delivery's Factflow headers, the base of a retry or dead-letter copy. */
  readonly headers: Readonly<Record<string, string>>;
  readonly identity: SettledIdentity;
  readonly undecodable: boolean;
}

/**
 * Carries out the kit's verdict on one delivery through the port, and reports it once done: an ack;
 * a hand-back; a retry or dead-letter copy confirmed before the original is acknowledged. A
 * settlement the broker made moot (the delivery reissued meanwhile) is withheld and counted
 * `superseded`, not reported. A copy that is not confirmed leaves the original unsettled: it is
 * handed back after `pauseAfterCopyFailure`, unreported, and the broker hands it out again.
 */
export async function carryOutVerdict<D>(
  context: VerdictContext<D>,
  delivery: D,
  of: VerdictOf,
): Promise<void> {
  const { port, counters } = context;
  const { verdict } = of;
  if (!port.isCurrent(delivery)) {
    if (verdict.kind !== "hand-back") counters.superseded += 1;
    return;
  }
  if (verdict.kind === "hand-back") {
    if (await port.handBack(delivery, "stopped")) reported(context, of);
    return;
  }
  if (verdict.kind === "ack") {
    // Most ports answer at once: no extra turn of the microtask queue per delivery then.
    const acked = port.ack(delivery);
    if (typeof acked === "boolean" ? acked : await acked) reported(context, of);
    else counters.superseded += 1;
    return;
  }
  const copy: SettlementCopy =
    verdict.kind === "retry"
      ? { kind: "retry", verdict, headers: retryHeaders(of.headers, verdict.nextAttempt, verdict.lastError) }
      : {
          kind: "dead",
          verdict,
          headers: deadLetterHeaders(of.headers, verdict.reason, context.origin, verdict.lastError),
        };
  const outcome = await publishCopy(context, delivery, copy);
  if (outcome === undefined) return;
  if (outcome === "superseded") {
    counters.superseded += 1;
    return;
  }
  if (outcome === "settled") {
    reported(context, of);
    return;
  }
  // Confirmed. If the delivery was reissued meanwhile, the copy exists and the broker hands the
  // original out again: a duplicate, never a loss.
  if (port.isCurrent(delivery) && (await port.ack(delivery))) reported(context, of);
  else counters.superseded += 1;
}

/**
 * {@link carryOutVerdict}, synchronously when it can be: a delivery the broker reissued, or an ack
 * the port answers at once, is settled and reported before this returns (undefined). Otherwise the
 * promise of {@link carryOutVerdict}. Throws what the port throws.
 */
export function carryOutVerdictNow<D>(
  context: VerdictContext<D>,
  delivery: D,
  of: VerdictOf,
): Promise<void> | undefined {
  const { port, counters } = context;
  const { verdict } = of;
  if (!port.isCurrent(delivery)) {
    if (verdict.kind !== "hand-back") counters.superseded += 1;
    return undefined;
  }
  if (verdict.kind !== "ack") return carryOutVerdict(context, delivery, of);
  const acked = port.ack(delivery);
  if (typeof acked !== "boolean") return settleAck(context, of, acked);
  if (acked) reported(context, of);
  else counters.superseded += 1;
  return undefined;
}

async function settleAck<D>(
  context: VerdictContext<D>,
  of: VerdictOf,
  acked: Promise<boolean>,
): Promise<void> {
  if (await acked) reported(context, of);
  else context.counters.superseded += 1;
}

/** The copy's outcome, or undefined when it was not confirmed (the original is then handed back). */
async function publishCopy<D>(
  context: VerdictContext<D>,
  delivery: D,
  copy: SettlementCopy,
): Promise<CopyOutcome | undefined> {
  const { port } = context;
  for (let attempt = 1; ; attempt++) {
    try {
      return await port.publishCopy(delivery, copy);
    } catch (error) {
      const classified = port.classifyError(
        error,
        `publish the ${copy.kind === "retry" ? "retry" : "dead-letter"} copy of a delivery of "${context.origin.destination}"`,
      );
      if (attempt < COPY_ATTEMPTS && again(classified) && !context.stopping() && port.isCurrent(delivery))
        continue;
      context.logger?.warn("the retry/dead-letter copy was not confirmed; handing the original back", {
        destination: context.origin.destination,
        error: classified.message,
      });
      await pauseAfterCopyFailure();
      if (port.isCurrent(delivery)) await port.handBack(delivery, "copy-failed");
      return undefined;
    }
  }
}

function again(error: ProviderError): boolean {
  return error.retryable && error.reason !== "timeout";
}

function reported<D>(context: VerdictContext<D>, of: VerdictOf): void {
  context.report.settled(of.verdict, of.identity, of.undecodable);
}
