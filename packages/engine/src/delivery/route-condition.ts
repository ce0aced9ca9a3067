import {
  type Adapter,
  type ConditionConfig,
  evaluatePredicate,
  isAdapterCondition,
  type JsonValue,
  type MessageEnvelope,
  PipelineError,
} from "@factflow/protocols";
import type { AdapterRegistry } from "../config/adapter-registry.js";
import type { ExecutionRuntime } from "../runtime.js";

/** A route's condition, ready to run: true runs the route, false skips the message. */
export interface RouteCondition {
  test(
    runtime: ExecutionRuntime,
    route: string,
    envelope: MessageEnvelope,
    attempt: number,
    signal: AbortSignal,
  ): Promise<boolean>;
  close?(): Promise<void> | void;
}

/**
 * Builds a route's condition. A predicate is evaluated on the payload/headers; `{ adapter }` runs a
 * registered adapter on the payload and skips only when its `data` is exactly `false` (anything
 * else, `null` included, runs the route). An adapter that reports an error makes the delivery fail
 * like an adapter of the chain would (retried, then dead-lettered).
 */
export async function createRouteCondition(
  condition: ConditionConfig,
  registry: AdapterRegistry,
  context: Parameters<AdapterRegistry["create"]>[2],
): Promise<RouteCondition> {
  if (!isAdapterCondition(condition)) {
    return {
      test: async (_runtime, _route, envelope) =>
        evaluatePredicate(condition, envelope.body, envelope.headers),
    };
  }
  const adapter: Adapter = await registry.create(
    condition.adapter,
    condition.config as Record<string, JsonValue>,
    context,
  );
  return {
    async test(runtime, route, envelope, attempt, signal) {
      const result = await adapter.process({
        message: envelope.body,
        envelope,
        executionId: runtime.executionId,
        route,
        adapterIndex: -1,
        correlationId: envelope.correlationId,
        messageId: envelope.id,
        attempt,
        lineageId: envelope.id,
        storage: runtime.storage,
        logger: runtime.logger,
        signal,
      });
      if (result.error !== undefined) {
        throw new PipelineError(
          "adapter_failed",
          `[factflow/engine] condition "${condition.adapter}" of route "${route}" failed: ${result.error}`,
          { retryable: result.retryable ?? true },
        );
      }
      return result.data !== false;
    },
    close: () => adapter.close?.(),
  };
}
