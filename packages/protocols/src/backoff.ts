/**
 * An exponential backoff curve for reconnects and internal retries (lineage writes, broker
 * reconnects, publish retries). Delivery retries use {@link RetryPolicy} and `retryDelayMs`.
 */
export interface Backoff {
  /** Delay before the first retry, in ms. */
  readonly initialDelayMs: number;
  /** Upper bound of any one delay, in ms. */
  readonly maxDelayMs: number;
  /** Each further delay is the previous one times this. @default 2 */
  readonly multiplier?: number;
  /**
   * Share of the delay (0 to 1) that may be taken off at random, so many processes retrying after
   * the same outage do not retry in step. 0.2 gives 80–100 % of the delay. @default 0
   */
  readonly jitter?: number;
}

/**
 * The delay before retry number `retry` (1 for the first retry):
 * `min(initialDelayMs * multiplier^(retry - 1), maxDelayMs)`, less up to `jitter` of it at random.
 */
export function backoffDelayMs(backoff: Backoff, retry: number): number {
  const exponent = Math.max(0, retry - 1);
  const base = Math.min(backoff.initialDelayMs * (backoff.multiplier ?? 2) ** exponent, backoff.maxDelayMs);
  const jitter = Math.min(1, Math.max(0, backoff.jitter ?? 0));
  return jitter === 0 ? base : base * (1 - jitter * Math.random());
}
