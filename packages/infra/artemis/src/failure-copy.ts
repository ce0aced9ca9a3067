import { type DeadLetterReason, Headers, type MessageEnvelope } from "@factflow/protocols";
import { DLQ_ID_HEADER } from "./envelope-codec.js";
import { isoTimestamp } from "./timestamp.js";

const MAX_ERROR_TEXT = 2_000;

function clip(text: string): string {
  return text.length > MAX_ERROR_TEXT ? `${text.slice(0, MAX_ERROR_TEXT)}…` : text;
}

/** Headers of the retry copy: attempt + 1 and the last error, everything else as delivered. */
export function retryHeaders(
  message: MessageEnvelope,
  nextAttempt: number,
  reason?: string,
): Record<string, string> {
  const headers: Record<string, string> = {
    ...message.headers,
    [Headers.deliveryAttempt]: String(nextAttempt),
  };
  if (reason !== undefined) headers[Headers.lastError] = clip(reason);
  return headers;
}

/** Headers of a dead letter: where it came from, why, when, and a selector-friendly id. */
export function deadLetterHeaders(
  message: MessageEnvelope,
  cause: DeadLetterReason,
  origin: { destination: string; subscription?: string },
  reason?: string,
): Record<string, string> {
  const headers: Record<string, string> = {
    ...message.headers,
    [Headers.deadLetterReason]: cause,
    [Headers.originalDestination]: origin.destination,
    [Headers.deadLetteredAt]: isoTimestamp(),
    [DLQ_ID_HEADER]: message.id,
  };
  if (origin.subscription !== undefined) headers[Headers.originalSubscription] = origin.subscription;
  if (reason !== undefined) headers[Headers.lastError] = clip(reason);
  return headers;
}

/** Headers of a redriven message: the dead-letter bookkeeping removed and a fresh attempt budget. */
export function redriveHeaders(message: MessageEnvelope): Record<string, string> {
  const headers: Record<string, string> = { ...message.headers, [Headers.deliveryAttempt]: "1" };
  for (const key of [
    Headers.deadLetterReason,
    Headers.originalDestination,
    Headers.originalSubscription,
    Headers.deadLetteredAt,
    Headers.lastError,
  ])
    delete headers[key];
  return headers;
}
