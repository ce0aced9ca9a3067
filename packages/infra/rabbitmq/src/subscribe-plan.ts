import type { ResolvedSubscribeOptions } from "@factflow/provider-kit";
import type { FailureRoute } from "./failure-router.js";
import { deadLetterQueueName, resolveDestination, topicSubscriptionQueue } from "./naming.js";
import type { QueueShape } from "./topology.js";

/** Everything a subscription needs, derived from `subscribe`'s arguments. */
export interface SubscribePlan {
  readonly target: ReturnType<typeof resolveDestination>;
  readonly route: FailureRoute;
  readonly shape: QueueShape;
}

/**
 * Maps a subscription (options already validated and defaulted by the kit) onto RabbitMQ: which
 * queue it consumes, where its dead letters go, and the queue arguments it asks for. FIFO means one
 * delivery at a time (prefetch 1 and one handler, set by the kit's runtime) on a
 * single-active-consumer queue. Message groups (`groupBy`/`groupByHeader`) also use a
 * single-active-consumer queue, so one consumer across every process sees the whole queue in order,
 * but with the full prefetch: the kit's group lanes run different groups side by side and keep each
 * group in order, retries included. Throws `invalid_destination` for a name RabbitMQ cannot carry.
 */
export function planSubscription(destination: string, options: ResolvedSubscribeOptions): SubscribePlan {
  const target = resolveDestination(destination);
  const fifo = options.ordering === "fifo";
  const shape: QueueShape = {
    ...(options.maxPriority === undefined ? {} : { maxPriority: options.maxPriority }),
    ...(fifo ? { singleActiveConsumer: true } : {}),
  };
  const sourceQueue =
    target.kind === "queue" ? target.queue : topicSubscriptionQueue(destination, options.subscription);
  const route: FailureRoute = {
    destination,
    subscription: options.subscription,
    kind: target.kind,
    sourceQueue,
    deadLetterQueue: deadLetterQueueName(sourceQueue, target.kind),
  };
  return { target, route, shape };
}
