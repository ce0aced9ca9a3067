import type { MessageHandler } from "@factflow/protocols";
import { groupedSubscription, hasGroupKey, type ResolvedSubscribeOptions } from "@factflow/provider-kit";
import type { PulsarSubscriptionType } from "./transport.js";

/** How one subscription consumes: its Pulsar subscription type, handler and options. */
export interface ConsumePlan {
  readonly subscriptionType: PulsarSubscriptionType;
  readonly handler: MessageHandler;
  readonly options: ResolvedSubscribeOptions;
}

/**
 * Maps a subscription's ordering onto Pulsar (options already validated and defaulted by the kit).
 *
 * - No ordering: a `Shared` subscription, competing consumers in any order.
 * - `ordering: "fifo"` with a group key (`groupBy`/`groupByHeader`): the kit has already wrapped the
 *   handler in its group lanes (a window of at least 1,000 deliveries, retries in place). The
 *   consumer takes a `Failover` subscription, so one consumer across every process sees the whole
 *   topic in publish order (the others stand by and take over if it goes), and the lanes run
 *   different groups side by side while each group keeps its order.
 * - `ordering: "fifo"` alone: the same `Failover` subscription, with the handler in a single lane of
 *   concurrency 1. A failed message is retried in place (after its backoff), so nothing published
 *   after it overtakes it.
 *
 * `Key_Shared` is not used: it needs the producer to put the group in the message key, and a publisher
 * does not know which field a subscriber groups by (a queue's subscribers decide that, per route).
 * Retries never go through the broker on an ordered subscription (the lanes retry in place), which
 * matters because Pulsar ignores `deliverAfterMs` on `Failover` subscriptions.
 */
export function planConsumption(handler: MessageHandler, options: ResolvedSubscribeOptions): ConsumePlan {
  if (options.ordering !== "fifo") return { subscriptionType: "Shared", handler, options };
  if (hasGroupKey(options)) return { subscriptionType: "Failover", handler, options };
  const serial = groupedSubscription(handler, { ...options, concurrency: 1 });
  // The lane keeps the order: the runtime hands it the whole window instead of one message at a time.
  const window = Object.freeze({ ...serial.options, ordering: "none" as const });
  return { subscriptionType: "Failover", handler: serial.handler, options: window };
}
