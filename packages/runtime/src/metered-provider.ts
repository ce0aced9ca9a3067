import {
  type Delivery,
  type HandlerResult,
  isSettlingStatus,
  type MessageHandler,
  type QueueProtocol,
  type SettlementListener,
  type SubscribeOptions,
  unwrapHandlerResult,
} from "@factflow/protocols";
import type { FactflowMetrics } from "./metrics.js";

/** Maps an (execution-scoped) destination to the route and queue labels of its metrics. */
export type RouteResolver = (destination: string) => { route: string; queue: string };

/**
 * Wraps a provider so every subscription's handler and verdicts feed the message metrics. It only
 * observes: the handler's return value and errors pass through unchanged, so settlement is the
 * provider's, and retries and dead letters are counted from the verdicts the provider reports
 * (`onSettled`), which also reach the caller's own `onSettled`.
 */
export function meterProvider(
  provider: QueueProtocol,
  metrics: FactflowMetrics,
  resolve: RouteResolver,
): QueueProtocol {
  return {
    get name() {
      return provider.name;
    },
    get capabilities() {
      return provider.capabilities;
    },
    get admin() {
      return provider.admin;
    },
    connect: () => provider.connect(),
    close: () => provider.close(),
    publish: (destination, message) => provider.publish(destination, message),
    counters: () => provider.counters(),
    health: () => provider.health?.() ?? { problems: [] },
    subscribe(destination: string, handler: MessageHandler, options: SubscribeOptions) {
      const metered: MessageHandler = async (
        delivery: Delivery,
        signal: AbortSignal,
      ): Promise<HandlerResult> => {
        const labels = resolve(delivery.destination);
        const started = performance.now();
        // A first delivery's wait is pure queue time; later attempts would add their retry delay.
        if (delivery.attempt <= 1) {
          const publishedAt = Date.parse(delivery.message.publishedAt);
          if (Number.isFinite(publishedAt))
            metrics.queueWaitSeconds.observe(
              { route: labels.route },
              Math.max(0, Date.now() - publishedAt) / 1000,
            );
        }
        metrics.inFlight.inc({ route: labels.route });
        let status = "INCOMPLETE";
        try {
          const result = await handler(delivery, signal);
          const unwrapped = unwrapHandlerResult(result);
          if (isSettlingStatus(unwrapped.status)) status = unwrapped.status;
          return result;
        } finally {
          metrics.inFlight.dec({ route: labels.route });
          metrics.handlerSeconds.observe({ route: labels.route }, (performance.now() - started) / 1000);
          // Label names in sorted order: the exposition keeps the order given, and dashboards match on it.
          metrics.messages.inc({ queue: labels.queue, route: labels.route, status });
        }
      };
      // Retries and dead letters are counted from the verdict the provider reports once it carried
      // it out, so a last attempt that threw or timed out counts as the dead letter it became.
      const caller = options.onSettled;
      const onSettled: SettlementListener = (settled) => {
        if (settled.kind === "dead-lettered")
          metrics.deadLetters.inc({ route: resolve(settled.destination).route });
        else if (settled.kind === "retried")
          metrics.retries.inc({ route: resolve(settled.destination).route });
        caller?.(settled);
      };
      return provider.subscribe(destination, metered, { ...options, onSettled });
    },
  };
}
