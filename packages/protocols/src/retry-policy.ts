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

/** The inclusive range of one retry policy field. */
export interface RetryPolicyLimit {
  readonly min: number;
  readonly max: number;
}

/**
 * The range of every retry policy field, the same in a pipeline config (`retry:`) and in subscribe
 * options: at most 100 attempts, an hour before the first retry, a multiplier of 10, a day between
 * two attempts. `maxAttempts` is an integer.
 */
export const RETRY_POLICY_LIMITS: Readonly<Record<keyof RetryPolicy, RetryPolicyLimit>> = Object.freeze({
  maxAttempts: Object.freeze({ min: 1, max: 100 }),
  initialDelayMs: Object.freeze({ min: 0, max: 3_600_000 }),
  multiplier: Object.freeze({ min: 1, max: 10 }),
  maxDelayMs: Object.freeze({ min: 0, max: 86_400_000 }),
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
