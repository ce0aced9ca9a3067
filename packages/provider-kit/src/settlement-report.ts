import type {
  DeliveryVerdict,
  DurabilityCounters,
  Logger,
  SettledDelivery,
  SettlementListener,
} from "@factflow/protocols";
import type { SettlementVerdict } from "./settlement.js";

/** The delivery a verdict was carried out on. */
export interface SettledIdentity {
  /** The message's id; undefined for a message that could not be decoded. */
  readonly messageId: string | undefined;
  /** The attempt that was settled. */
  readonly attempt: number;
}

/** The subscription a {@link SettlementReport} reports for (a `Subscription` serves). */
export interface ReportedSubscription {
  /** The destination subscribed to. */
  readonly destination: string;
  /** The subscription's name. */
  readonly name: string;
}

/**
 * The one place a settled delivery is counted and reported. A provider calls {@link settled} once it
 * has carried out the kit's verdict (an ack sent, a retry or dead-letter copy confirmed and the
 * original settled, a delivery handed back), and nowhere else counts `acked`, `retried`,
 * `deadLettered` or an incomplete attempt's `redelivered`; so every provider counts them the same way
 * and every subscriber's `onSettled` hears the verdict as it happened.
 *
 * A hand-back is reported but not counted here: the delivery is counted `redelivered` when it is
 * handed out again flagged as redelivered (see `DurabilityCounters.redelivered`).
 */
export class SettlementReport {
  readonly #counters: DurabilityCounters;
  readonly #destination: string;
  readonly #subscription: string;
  readonly #listener: SettlementListener | undefined;
  readonly #logger: Logger | undefined;

  /**
   * `counters` are the provider's (one set per provider instance), `onSettled` the subscription's;
   * a listener's throw is logged on `logger`.
   */
  constructor(
    counters: DurabilityCounters,
    subscription: ReportedSubscription,
    onSettled?: SettlementListener,
    logger?: Logger,
  ) {
    this.#counters = counters;
    this.#destination = subscription.destination;
    this.#subscription = subscription.name;
    this.#listener = onSettled;
    this.#logger = logger;
  }

  /**
   * `verdict` was carried out on the delivery `identity` names. `undecodable` marks a message that
   * was dead-lettered because it is not a Factflow message (see {@link undecodableVerdict}).
   */
  settled(verdict: SettlementVerdict, identity: SettledIdentity, undecodable = false): void {
    const counters = this.#counters;
    let reported: DeliveryVerdict;
    switch (verdict.kind) {
      case "ack":
        counters.acked += 1;
        reported = ACKED;
        break;
      case "retry":
        if (verdict.incomplete) counters.redelivered += 1;
        else counters.retried += 1;
        reported = {
          kind: "retried",
          nextAttempt: verdict.nextAttempt,
          delayMs: verdict.delayMs,
          incomplete: verdict.incomplete,
          lastError: verdict.lastError,
        };
        break;
      case "dead":
        counters.deadLettered += 1;
        reported = {
          kind: "dead-lettered",
          reason: verdict.reason,
          lastError: verdict.lastError,
          undecodable,
        };
        break;
      case "hand-back":
        reported = HANDED_BACK;
        break;
    }
    const listener = this.#listener;
    if (listener === undefined) return;
    const event: SettledDelivery = {
      ...reported,
      destination: this.#destination,
      subscription: this.#subscription,
      messageId: identity.messageId,
      attempt: identity.attempt,
    };
    try {
      listener(event);
    } catch (error) {
      this.#logger?.warn("onSettled listener threw; ignored", {
        destination: this.#destination,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
}

const ACKED: DeliveryVerdict = Object.freeze({ kind: "acked" });
const HANDED_BACK: DeliveryVerdict = Object.freeze({ kind: "handed-back" });

/**
 * The verdict on a message that is not a Factflow message (undecodable body or headers): dead-letter
 * it at once (`rejected`), so it stays inspectable instead of looping. Report it with
 * `undecodable = true`.
 */
export function undecodableVerdict(detail: string): Extract<SettlementVerdict, { kind: "dead" }> {
  return { kind: "dead", reason: "rejected", lastError: `not a Factflow message: ${detail}` };
}

/**
 * How long a provider waits before giving a delivery back when its retry or dead-letter copy could
 * not be confirmed, so a failure that persists (a broker refusing the copy) does not become a hot
 * redelivery loop.
 */
export const COPY_FAILURE_PAUSE_MS = 1_000;

/** Waits {@link COPY_FAILURE_PAUSE_MS}. */
export function pauseAfterCopyFailure(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, COPY_FAILURE_PAUSE_MS));
}

/**
 * Waits for `work` to settle, but no longer than `ms`; never rejects. For shutdown paths, where a
 * stalled broker must not make `unsubscribe()` or `close()` hang.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.then(
      () => {},
      () => {},
    ),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}
