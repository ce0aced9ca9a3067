import type { MessageEnvelope, ProviderError } from "@factflow/protocols";
import type { SettlementVerdict } from "./settlement.js";

/** A delivery decoded into a Factflow message. */
export interface DecodedDelivery {
  readonly envelope: MessageEnvelope;
  /** The attempt it carries (`x-delivery-attempt`, 1 when absent). */
  readonly attempt: number;
  /**
   * What the handler is told of `redelivered`, when the port knows better than the flag it passed to
   * `deliver` (which is also what the runtime counts as `redelivered`). The embedded broker keeps a
   * retried message in place and flags an incomplete attempt's retry as redelivered, but counts it
   * once, when it is settled (`SettlementReport`), not again when it is handed out.
   */
  readonly redelivered?: boolean;
}

/** A delivery that is not a Factflow message; `headers` are what could be read of it (may be empty). */
export interface UndecodableDelivery {
  readonly error: string;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * The copy the runtime asks the port to publish, with the original's body: a retry (to the source,
 * due after `verdict.delayMs`) or a dead letter (to the source's dead-letter destination). `headers`
 * are the copy's complete Factflow headers, made by `retryHeaders` / `deadLetterHeaders`.
 */
export type SettlementCopy =
  | {
      readonly kind: "retry";
      readonly headers: Record<string, string>;
      readonly verdict: Extract<SettlementVerdict, { kind: "retry" }>;
    }
  | {
      readonly kind: "dead";
      readonly headers: Record<string, string>;
      readonly verdict: Extract<SettlementVerdict, { kind: "dead" }>;
    };

/**
 * What became of a copy the broker took:
 * - `confirmed`: the broker confirmed the copy; the runtime now acknowledges the original.
 * - `settled`: the port settled the original together with the copy, in one atomic step.
 * - `superseded`: the broker had reissued the original meanwhile (another consumer holds it now), so
 *   nothing was settled; counted `superseded`.
 */
export type CopyOutcome = "confirmed" | "settled" | "superseded";

/**
 * Why a delivery is handed back untouched (no attempt consumed):
 * - `stopped`: its handler was aborted by a stop (reported `handed-back`).
 * - `not-run`: taken ahead and never handed to the handler (a stop, or it arrived during one).
 * - `copy-failed`: its retry or dead-letter copy was not confirmed; handed back after
 *   `pauseAfterCopyFailure`, so the broker hands it out again.
 */
export type HandBackCause = "stopped" | "not-run" | "copy-failed";

/**
 * The transport of one subscription, what a provider writes for its broker; the rules (backlog,
 * concurrency, deadlines, settlement, copies, hand-backs, stop, counters, reports) are the
 * {@link SubscriptionRuntime}'s. `D` is the provider's own handle of one delivery (an AMQP message
 * and its channel, a stream entry id, a STOMP frame and its ticket...).
 *
 * Every method but `receive`, `stopReceiving` and `close` is about one delivery the port handed to
 * `deliver`. None of them is called twice for one delivery's settlement, and none after `close`.
 */
export interface SubscriptionPort<D> {
  /**
   * Starts the broker consumer and calls `deliver` for each delivery, in the broker's order, with
   * `redelivered` true when the broker says it was handed out before. Resolves once the broker has
   * registered the consumer; when it rejects, the runtime stops (`stopReceiving`, `close`) and
   * `start` rejects with the error. The runtime keeps at most what the broker sends: flow control (a
   * prefetch, credits, a read window) is the port's, helped by `SubscriptionRuntime.unsettled` and
   * {@link release}.
   */
  receive(deliver: (delivery: D, redelivered: boolean) => void): Promise<void>;
  /** Stops the broker handing out more deliveries (cancel the consumer); the held ones stay held. */
  stopReceiving(): Promise<void>;
  /** The delivery as a Factflow message, or why it is not one. */
  decode(delivery: D): DecodedDelivery | UndecodableDelivery;
  /** False when the broker has reissued the delivery since (connection or consumer replaced). */
  isCurrent(delivery: D): boolean;
  /** Acknowledges the delivery; false when it could not (the broker had taken it back). */
  ack(delivery: D): boolean | Promise<boolean>;
  /** Gives the delivery back to the broker untouched; false when it could not. */
  handBack(delivery: D, cause: HandBackCause): boolean | Promise<boolean>;
  /** Publishes `copy` with the delivery's body and resolves once the broker confirmed it; rejects otherwise. */
  publishCopy(delivery: D, copy: SettlementCopy): Promise<CopyOutcome>;
  /** The broker client's error as a `ProviderError` (reason, retryable, secrets removed). */
  classifyError(error: unknown, operation: string): ProviderError;
  /** The runtime is done with the delivery, whatever became of it: room for another one. */
  release?(delivery: D): void;
  /**
   * A handler slot became free: its handler returned (its delivery may still await a `settleAfter`)
   * or its delivery was settled. For a port whose flow control reads more while a handler is idle
   * (a read window, say), since a delivery awaiting its `settleAfter` is not released until it settles.
   */
  handlerFreed?(): void;
  /** The last step of a stop, after every settlement finished or timed out: close the consumer. */
  close?(): Promise<void>;
}
