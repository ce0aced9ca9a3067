import {
  type DeadLetterReason,
  type Delivery,
  type HandlerResult,
  isHandlerTimeout,
  type MessageHandler,
  MessageStatus,
  type RetryPolicy,
  retryDelayMs,
  settleAfterOf,
} from "@factflow/protocols";
import type { HandlerRun } from "./deadline-sweep.js";

/** Longest failure text kept on retried and dead-lettered copies (`x-last-error`). */
export const MAX_LAST_ERROR_LENGTH = 1_000;

/** How a handler run ended, as the provider saw it. */
export type HandlerOutcome =
  | { readonly kind: "returned"; readonly result: HandlerResult }
  | { readonly kind: "threw"; readonly error: unknown }
  /** Ran past `handlerTimeoutMs`; a result it returns later is ignored. */
  | { readonly kind: "timed-out"; readonly timeoutMs: number }
  /** The subscription or the provider stopped while it ran. */
  | { readonly kind: "stopped" };

/** What the provider does with the delivery. */
export type SettlementVerdict =
  | { readonly kind: "ack" }
  /**
   * Publish attempt `nextAttempt` after `delayMs` (confirmed before the original is settled).
   * `incomplete` marks a handler that threw, timed out or returned no settling status: it is
   * counted as `redelivered` rather than `retried`.
   */
  | {
      readonly kind: "retry";
      readonly nextAttempt: number;
      readonly delayMs: number;
      readonly lastError: string;
      readonly incomplete: boolean;
    }
  | { readonly kind: "dead"; readonly reason: DeadLetterReason; readonly lastError: string }
  /** Give the delivery back untouched (no attempt consumed): the broker hands it out again. */
  | { readonly kind: "hand-back" };

/** What the decision needs to know about the delivery. */
export interface SettlementContext {
  /** The attempt that just ran (1-based, from `x-delivery-attempt`). */
  readonly attempt: number;
  readonly policy: RetryPolicy;
  /** A topic subscription dead-letters a FAILED delivery at once, so no other subscriber is touched. */
  readonly isTopic: boolean;
}

/**
 * The settlement rules every provider obeys, in one place:
 *
 * - `ACKNOWLEDGED` settles.
 * - `REJECTED` dead-letters at once (`rejected`).
 * - `FAILED` retries with the policy's backoff until attempt `maxAttempts` has failed, then
 *   dead-letters (`exhausted`); on a topic subscription it dead-letters at once (`topic-failure`).
 * - A handler that throws, times out, or returns anything else (`PENDING`, `DELIVERED`, `EXPIRED`,
 *   a value that is no status) is **incomplete**: it counts as an attempt with the same backoff, and
 *   after the budget it is dead-lettered (`incomplete`). So no message circulates without bound or
 *   without delay, whatever its handler does.
 * - Only a stop (unsubscribe, provider close) hands the delivery back without consuming an attempt.
 */
export function decideSettlement(outcome: HandlerOutcome, context: SettlementContext): SettlementVerdict {
  switch (outcome.kind) {
    case "stopped":
      return { kind: "hand-back" };
    case "timed-out":
      return incomplete(`handler timed out after ${outcome.timeoutMs} ms`, context);
    case "threw":
      return incomplete(describeThrown(outcome.error), context);
    case "returned":
      return decideReturned(outcome.result, context);
  }
}

function decideReturned(result: HandlerResult, context: SettlementContext): SettlementVerdict {
  const raw = result as unknown;
  let status: unknown = raw;
  let reason: string | undefined;
  if (typeof raw === "object" && raw !== null) {
    status = (raw as { status?: unknown }).status;
    const r = (raw as { reason?: unknown }).reason;
    if (typeof r === "string") reason = r.slice(0, MAX_LAST_ERROR_LENGTH);
  }
  switch (status) {
    case MessageStatus.ACKNOWLEDGED:
      return { kind: "ack" };
    case MessageStatus.REJECTED:
      return { kind: "dead", reason: "rejected", lastError: reason ?? "handler returned REJECTED" };
    case MessageStatus.FAILED: {
      const lastError = reason ?? "handler returned FAILED";
      if (context.isTopic) return { kind: "dead", reason: "topic-failure", lastError };
      if (context.attempt >= context.policy.maxAttempts)
        return { kind: "dead", reason: "exhausted", lastError };
      return retry(lastError, false, context);
    }
    default:
      return incomplete(
        `handler returned ${JSON.stringify(status) ?? "undefined"}, not a settling status${reason === undefined ? "" : ` (${reason})`}`,
        context,
      );
  }
}

function incomplete(detail: string, context: SettlementContext): SettlementVerdict {
  const lastError = detail.slice(0, MAX_LAST_ERROR_LENGTH);
  return context.attempt >= context.policy.maxAttempts
    ? { kind: "dead", reason: "incomplete", lastError }
    : retry(lastError, true, context);
}

function retry(lastError: string, incomplete: boolean, context: SettlementContext): SettlementVerdict {
  const nextAttempt = context.attempt + 1;
  return {
    kind: "retry",
    nextAttempt,
    delayMs: retryDelayMs(context.policy, nextAttempt),
    lastError,
    incomplete,
  };
}

function describeThrown(error: unknown): string {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return `handler threw ${text}`;
}

/**
 * Runs a handler until it settles or its signal aborts, whichever comes first. The provider aborts
 * the signal with a `HandlerTimeoutError` when the handler runs past its timeout, or with any other
 * reason when the subscription stops; either way the outcome is known at once, even if the handler
 * ignores its signal and never returns (its late result is dropped). A result returned in time with
 * `settleAfter` is the outcome once that promise settles, whatever aborts meanwhile; `onReturned` is
 * called when such a wait starts, so the provider can give the handler's concurrency slot to the next
 * delivery (the delivery itself stays unsettled, and counts against the prefetch, until then).
 *
 * `onLate` is called when the handler returns or throws after a timeout or an abort already decided
 * the outcome: its result settles nothing.
 *
 * Given a {@link HandlerRun}, the run tells this function of its abort directly (see
 * {@link HandlerRun.abort}); given a bare `AbortController`, it listens on the signal.
 */
export function runHandler(
  handler: MessageHandler,
  delivery: Delivery,
  source: AbortController | HandlerRun,
  onReturned?: () => void,
  onLate?: () => void,
): Promise<HandlerOutcome> {
  const run = "watch" in source ? source : undefined;
  const signal = run === undefined ? (source as AbortController).signal : run.controller.signal;
  const aborted = (): HandlerOutcome =>
    isHandlerTimeout(signal.reason)
      ? { kind: "timed-out", timeoutMs: signal.reason.timeoutMs }
      : { kind: "stopped" };
  if (signal.aborted) return Promise.resolve(aborted());
  return new Promise<HandlerOutcome>((resolve) => {
    let done = false;
    const finish = (outcome: HandlerOutcome) => {
      if (done) return;
      done = true;
      if (run === undefined) signal.removeEventListener("abort", onAbort);
      resolve(outcome);
    };
    // Set once the handler has returned in time: an abort while its `settleAfter` runs changes nothing.
    let returned = false;
    const onAbort = () => {
      if (!returned) finish(aborted());
    };
    if (run === undefined) signal.addEventListener("abort", onAbort, { once: true });
    else run.watch(onAbort);
    let pending: Promise<HandlerResult> | HandlerResult;
    try {
      pending = handler(delivery, signal);
    } catch (error) {
      finish({ kind: "threw", error });
      return;
    }
    Promise.resolve(pending).then(
      (result) => {
        if (done) return onLate?.();
        if (signal.aborted) return finish(aborted());
        const after = settleAfterOf(result);
        if (after === undefined) return finish({ kind: "returned", result });
        returned = true;
        onReturned?.();
        const settle = () => finish({ kind: "returned", result });
        after.then(settle, settle);
      },
      (error: unknown) => {
        if (done) return onLate?.();
        finish(signal.aborted ? aborted() : { kind: "threw", error });
      },
    );
  });
}
