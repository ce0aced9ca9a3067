import {
  type MessageHandler,
  ProviderError,
  type RetryPolicy,
  resolveRetryPolicy,
  type SubscribeOptions,
} from "@factflow/protocols";
import type { FailureRoute } from "./failure-router.js";
import { deadLetterQueueName, resolveDestination, topicSubscriptionQueue } from "./naming.js";
import type { QueueShape } from "./topology.js";

/** Everything a subscription needs, derived and validated from `subscribe`'s arguments. */
export interface SubscribePlan {
  readonly target: ReturnType<typeof resolveDestination>;
  readonly route: FailureRoute;
  readonly shape: QueueShape;
  readonly prefetch: number;
  readonly concurrency: number;
  readonly policy: RetryPolicy;
  readonly handlerTimeoutMs: number;
}

/**
 * Validates a subscription and maps it onto RabbitMQ: which queue it consumes, where its dead
 * letters go, and the queue arguments it asks for. FIFO means one delivery at a time (prefetch 1,
 * one handler) on a single-active-consumer queue. Throws `invalid_argument` / `invalid_destination`.
 */
export function planSubscription(
  destination: string,
  handler: MessageHandler,
  options: SubscribeOptions,
): SubscribePlan {
  const target = resolveDestination(destination);
  const invalid = (message: string) =>
    new ProviderError("rabbitmq", "invalid-input", `subscribe to "${destination}": ${message}`, {
      code: "invalid_argument",
    });
  if (typeof options?.subscription !== "string" || options.subscription.length === 0) {
    throw invalid("options.subscription must name the subscription");
  }
  if (typeof handler !== "function") throw invalid("handler must be a function");
  const fifo = options.ordering === "fifo";
  const prefetch = fifo ? 1 : (options.prefetch ?? 10);
  const concurrency = fifo ? 1 : Math.min(options.concurrency ?? 1, prefetch);
  if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 65_535) {
    throw invalid("prefetch must be an integer from 1 to 65535");
  }
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw invalid("concurrency must be a positive integer");
  const maxPriority = options.maxPriority;
  if (
    maxPriority !== undefined &&
    !(Number.isInteger(maxPriority) && maxPriority >= 1 && maxPriority <= 10)
  ) {
    throw invalid("maxPriority must be an integer from 1 to 10");
  }
  const handlerTimeoutMs = options.handlerTimeoutMs ?? 1_800_000;
  if (!(handlerTimeoutMs > 0)) throw invalid("handlerTimeoutMs must be a positive number of milliseconds");
  const shape: QueueShape = {
    ...(maxPriority === undefined ? {} : { maxPriority }),
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
  return {
    target,
    route,
    shape,
    prefetch,
    concurrency,
    policy: resolveRetryPolicy(options.retry),
    handlerTimeoutMs,
  };
}
