import { type DeadLetterReason, Headers } from "@factflow/protocols";
import { MAX_LAST_ERROR_LENGTH } from "./settlement.js";

/** Where a dead letter came from: the destination, and the subscription for a topic. */
export interface DeadLetterOrigin {
  readonly destination: string;
  /** Set for a topic subscription only: its dead letters are kept per subscription. */
  readonly subscription?: string | undefined;
}

/** The headers a dead letter carries about its failure; a redrive removes them. */
const FAILURE_HEADERS = [
  Headers.deadLetterReason,
  Headers.originalDestination,
  Headers.originalSubscription,
  Headers.deadLetteredAt,
  Headers.lastError,
] as const;

/** Failure text as it travels in `x-last-error`: at most `MAX_LAST_ERROR_LENGTH` characters. */
function lastErrorText(text: string): string {
  return text.length > MAX_LAST_ERROR_LENGTH ? text.slice(0, MAX_LAST_ERROR_LENGTH) : text;
}

/**
 * Headers of the retry copy of a delivery: its headers with `x-delivery-attempt` set to
 * `nextAttempt` and, when given, `x-last-error` (cut at `MAX_LAST_ERROR_LENGTH`). Returns a new
 * object; pass the delivered message's Factflow headers (without broker headers).
 */
export function retryHeaders(
  headers: Readonly<Record<string, string>>,
  nextAttempt: number,
  lastError?: string,
): Record<string, string> {
  const copy: Record<string, string> = { ...headers, [Headers.deliveryAttempt]: String(nextAttempt) };
  if (lastError !== undefined) copy[Headers.lastError] = lastErrorText(lastError);
  return copy;
}

/**
 * Headers of a dead letter: its headers plus why (`x-dead-letter-reason`), where from
 * (`x-original-destination`, and `x-original-subscription` for a topic), when (`x-dead-lettered-at`,
 * ISO-8601 UTC) and, when given, `x-last-error` (cut at `MAX_LAST_ERROR_LENGTH`). The attempt header
 * is kept: it says how many attempts were made. Returns a new object.
 */
export function deadLetterHeaders(
  headers: Readonly<Record<string, string>>,
  reason: DeadLetterReason,
  origin: DeadLetterOrigin,
  lastError?: string,
  at: Date = new Date(),
): Record<string, string> {
  const copy: Record<string, string> = {
    ...headers,
    [Headers.deadLetterReason]: reason,
    [Headers.originalDestination]: origin.destination,
    [Headers.deadLetteredAt]: at.toISOString(),
  };
  if (origin.subscription !== undefined) copy[Headers.originalSubscription] = origin.subscription;
  if (lastError !== undefined) copy[Headers.lastError] = lastErrorText(lastError);
  return copy;
}

/**
 * Headers of a redriven dead letter: the failure bookkeeping removed and a fresh attempt budget
 * (`x-delivery-attempt` 1). Returns a new object.
 */
export function redriveHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const copy: Record<string, string> = { ...headers, [Headers.deliveryAttempt]: "1" };
  for (const key of FAILURE_HEADERS) delete copy[key];
  return copy;
}
