import type { RetryPolicy } from "./retry-policy.js";

/** Options of one subscription. */
export interface SubscribeOptions {
  /**
   * Subscription name. For a topic it names the durable subscription (each name gets its own copy of
   * every message); for a queue, subscriptions with any names compete for messages.
   */
  readonly subscription: string;
  /** Deliveries the broker may hand this consumer before it settles any. @default 10 */
  readonly prefetch?: number;
  /** Handlers running at once for this subscription; at most `prefetch`. @default 1 */
  readonly concurrency?: number;
  /** Retry policy of `FAILED` deliveries. Topic subscriptions never retry. @default DEFAULT_RETRY_POLICY */
  readonly retry?: Partial<RetryPolicy>;
  /** `fifo`: one message at a time in publish order (per group when `groupBy` is set). @default "none" */
  readonly ordering?: "none" | "fifo";
  /** Top-level body field whose value names the FIFO group of a message. */
  readonly groupBy?: string;
  /** Declares the queue a priority queue with this many levels (1–10). */
  readonly maxPriority?: number;
  /** Abort a handler that runs longer than this (it is then redelivered). @default 1_800_000 */
  readonly handlerTimeoutMs?: number;
}

/** A live subscription. */
export interface Subscription {
  readonly destination: string;
  readonly name: string;
  /**
   * Stops consuming. In-flight handlers are aborted and their deliveries redelivered later, so this
   * resolves promptly. Idempotent.
   */
  unsubscribe(): Promise<void>;
}
