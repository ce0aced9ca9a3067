import { type DeadLetter, Headers, type MessageEnvelope } from "@factflow/protocols";
import { parseAttempt } from "./outbound.js";

/** What a provider knows of a dead letter when its failure headers do not say. */
export interface DeadLetterFallbacks {
  /** The reason when `x-dead-letter-reason` is missing. */
  readonly reason: string;
  /** The time when `x-dead-lettered-at` is missing (the broker's publish time, say). */
  readonly deadLetteredAt: string;
}

/**
 * A dead letter as `admin.browseDeadLetters` reports it: `message` with the reason, the attempts
 * made, the time and the last error its failure headers (`deadLetterHeaders`) carry. `headers` are
 * the message's headers as stored; what they leave out comes from `fallbacks`.
 */
export function deadLetterFromHeaders(
  message: MessageEnvelope,
  headers: Readonly<Record<string, string>>,
  fallbacks: DeadLetterFallbacks,
): DeadLetter {
  const letter: DeadLetter = {
    message,
    reason: headers[Headers.deadLetterReason] ?? fallbacks.reason,
    attempts: parseAttempt(headers[Headers.deliveryAttempt]),
    deadLetteredAt: headers[Headers.deadLetteredAt] ?? fallbacks.deadLetteredAt,
  };
  const lastError = headers[Headers.lastError];
  return lastError === undefined ? letter : { ...letter, lastError };
}
