import type { DeadLetterReason } from "./headers.js";

/**
 * What a provider did with one delivery once it was settled, as the provider carried it out (not as a
 * caller would predict it from the handler's return value):
 *
 * - `acked`: the handler returned ACKNOWLEDGED and the delivery was acknowledged. With
 *   `deadLetter: false`, a delivery dropped instead of dead-lettered is reported `acked` too.
 * - `retried`: a copy with attempt `nextAttempt` was confirmed by the broker (due after `delayMs`) and
 *   the original settled. `incomplete` is true when the handler threw, timed out or returned no
 *   settling status, false when it returned FAILED.
 * - `dead-lettered`: a dead-letter copy was confirmed and the original settled; `reason` says why
 *   (`rejected`, `exhausted`, `incomplete` for a last attempt that threw, timed out or returned no
 *   settling status, `topic-failure`), `undecodable` is true for a message that is not a Factflow
 *   message (dead-lettered `rejected` before any handler saw it).
 * - `handed-back`: the subscription or provider stopped while the delivery's handler ran; it was
 *   given back to the broker with no attempt consumed and will be delivered again. Deliveries the
 *   provider had taken ahead but not yet handed to the handler go back too, unreported.
 */
export type DeliveryVerdict =
  | { readonly kind: "acked" }
  | {
      readonly kind: "retried";
      readonly nextAttempt: number;
      readonly delayMs: number;
      readonly incomplete: boolean;
      readonly lastError: string;
    }
  | {
      readonly kind: "dead-lettered";
      readonly reason: DeadLetterReason;
      readonly lastError: string;
      readonly undecodable: boolean;
    }
  | { readonly kind: "handed-back" };

/** One settled delivery, as `SubscribeOptions.onSettled` receives it. */
export type SettledDelivery = DeliveryVerdict & {
  /** The destination subscribed to (`/queue/…` or `/topic/…`). */
  readonly destination: string;
  /** The subscription's name. */
  readonly subscription: string;
  /** The message's id; undefined for a message that could not be decoded. */
  readonly messageId: string | undefined;
  /** The attempt that was settled (1-based, as the delivery carried it). */
  readonly attempt: number;
};

/**
 * Told of each settled delivery of one subscription, once, after the provider carried the verdict
 * out. A settlement the provider withheld because the broker had already reissued the delivery
 * (counted `superseded`) is not reported: the reissued delivery is, when it settles. It runs on the
 * provider's settlement path, so it must be quick and must not throw (a throw is caught and dropped).
 */
export type SettlementListener = (settled: SettledDelivery) => void;
