import type { RetryPolicy } from "./retry-policy.js";
import type { SettlementListener } from "./settled-delivery.js";

/** Deliveries the broker may hand a consumer ahead when a subscription sets no `prefetch`. */
export const DEFAULT_PREFETCH = 10;

/**
 * The largest `prefetch` (and so `concurrency`) any provider accepts, and the largest `prefetch` of a
 * pipeline route. One limit for every broker, below each broker's own ceiling (AMQP's 16-bit
 * prefetch count, Artemis' byte-counted consumer window), so a subscription that works on one
 * provider works on all of them; and every unsettled delivery is held in memory by the provider.
 */
export const MAX_PREFETCH = 10_000;

/** How long a handler may run when a subscription sets no `handlerTimeoutMs`: 30 minutes. */
export const DEFAULT_HANDLER_TIMEOUT_MS = 1_800_000;

/**
 * The longest `handlerTimeoutMs` (and pipeline `handler_timeout_ms`): one day. Longer work belongs in
 * a job the handler starts and a message it receives later, not in one delivery held open.
 */
export const MAX_HANDLER_TIMEOUT_MS = 86_400_000;

/**
 * Options of one subscription. `@factflow/provider-kit` validates them (`SubscribeOptionsSchema`) and
 * fills the defaults before a provider sees them; values outside the documented ranges are refused.
 */
export interface SubscribeOptions {
  /**
   * Subscription name. For a topic it names the durable subscription (each name gets its own copy of
   * every message); for a queue, subscriptions with any names compete for messages.
   */
  readonly subscription: string;
  /**
   * Deliveries the broker may hand this consumer before it settles any, 1–10000 (`MAX_PREFETCH`).
   * @default 10, or `concurrency` when that is larger
   */
  readonly prefetch?: number;
  /** Handlers running at once for this subscription, from 1 to `prefetch`. @default 1 */
  readonly concurrency?: number;
  /** Retry policy of `FAILED` deliveries. Topic subscriptions never retry. @default DEFAULT_RETRY_POLICY */
  readonly retry?: Partial<RetryPolicy>;
  /** `fifo`: one message at a time in publish order (per group when `groupBy` is set). @default "none" */
  readonly ordering?: "none" | "fifo";
  /**
   * Body field whose value names the FIFO group of a message: a top-level name, or a dotted path
   * (`customer.id`) on a provider whose `capabilities.orderedGroups` is true. Needs `ordering: "fifo"`
   * and a provider whose `capabilities.messageGroups` is true.
   */
  readonly groupBy?: string;
  /**
   * Header whose value names the FIFO group of a message, instead of `groupBy`; needs `ordering:
   * "fifo"` and a provider whose `capabilities.orderedGroups` is true.
   */
  readonly groupByHeader?: string;
  /**
   * `false`: a message whose attempts are spent is acknowledged and dropped instead of dead-lettered.
   * @default true
   */
  readonly deadLetter?: boolean;
  /**
   * Declares the queue a priority queue with this many levels (1–10); needs a provider whose
   * `capabilities.priorities` is true.
   */
  readonly maxPriority?: number;
  /**
   * Abort a handler that runs longer than this, 1 ms to one day (`MAX_HANDLER_TIMEOUT_MS`); the
   * delivery then counts as an incomplete attempt. @default 1_800_000 (`DEFAULT_HANDLER_TIMEOUT_MS`)
   */
  readonly handlerTimeoutMs?: number;
  /**
   * The handler's promise that, once it has settled a delivery, it keeps no abort listener on that
   * delivery's signal and no reference to it. A provider may then hand the same `AbortSignal` to a
   * later delivery of this subscription instead of making an `AbortController` per delivery (a
   * large share of an in-process broker's cost). A signal that was aborted, or that still has an
   * abort listener when its delivery settles, is never handed out again. Providers may ignore it.
   * @default false
   */
  readonly releasesSignal?: boolean;
  /**
   * Told of each delivery's verdict once the provider has carried it out: `acked`, `retried`,
   * `dead-lettered` (with its reason, `incomplete` included) or `handed-back` (see
   * `SettledDelivery`). Every provider reports it from the provider kit's one settlement path, so the
   * caller never re-derives the verdict from the handler's return value.
   */
  readonly onSettled?: SettlementListener;
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
