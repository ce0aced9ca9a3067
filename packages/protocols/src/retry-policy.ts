/**
 * How a subscription retries `FAILED` deliveries. The budget counts deliveries: attempt 1 is the
 * first, and after attempt `maxAttempts` fails the message is dead-lettered.
 */
export interface RetryPolicy {
  /** Total delivery attempts before dead-lettering. @default 3 */
  readonly maxAttempts: number;
  /** Delay before the second attempt, in ms. @default 1000 */
  readonly initialDelayMs: number;
  /** Each further delay is the previous one times this. @default 2 */
  readonly multiplier: number;
  /** Upper bound of any one delay, in ms. @default 60000 */
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 3,
  initialDelayMs: 1000,
  multiplier: 2,
  maxDelayMs: 60_000,
});

/**
 * The delay before delivering attempt `nextAttempt` (2 for the first retry):
 * `min(initialDelayMs * multiplier^(nextAttempt - 2), maxDelayMs)`.
 */
export function retryDelayMs(policy: RetryPolicy, nextAttempt: number): number {
  const exponent = Math.max(0, nextAttempt - 2);
  return Math.min(policy.initialDelayMs * policy.multiplier ** exponent, policy.maxDelayMs);
}

/** Fills the missing fields of a partial policy with the defaults. */
export function resolveRetryPolicy(partial?: Partial<RetryPolicy>): RetryPolicy {
  return Object.freeze({ ...DEFAULT_RETRY_POLICY, ...partial });
}
