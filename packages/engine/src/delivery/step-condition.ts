import {
  type Adapter,
  type AdapterResult,
  type ConditionConfig,
  evaluatePredicate,
  isAdapterCondition,
  isStatefulAdapter,
  type JsonValue,
  type PipelineContext,
  PipelineError,
} from "@factflow/protocols";
import type { AdapterRegistry } from "../config/adapter-registry.js";

/** What a skipped step returns: its input, unchanged, marked so its lineage row reads `skipped`. */
export const SKIPPED_STEP_METADATA = "skipped";

/** True when a step's result says its condition skipped it. */
export function isSkippedStep(result: AdapterResult): boolean {
  return result.metadata?.[SKIPPED_STEP_METADATA] === true;
}

/**
 * Wraps one adapter of a chain in its step condition. The condition sees the step's input (the
 * previous step's `data`) and the delivery's headers; only an explicit `false` (a predicate that
 * does not hold, or a condition adapter whose `data` is `false`) skips the step. A skipped step
 * passes its input on unchanged.
 */
export async function withStepCondition(
  adapter: Adapter,
  condition: ConditionConfig,
  registry: AdapterRegistry,
  context: Parameters<AdapterRegistry["create"]>[2],
): Promise<Adapter> {
  if (isStatefulAdapter(adapter)) {
    throw new PipelineError(
      "invalid_argument",
      `[factflow/engine] route "${context.route}": adapter "${adapter.type}" collects messages into batches, and a batching step cannot be skipped; put the condition on the route or on a step before it`,
    );
  }
  const judge = isAdapterCondition(condition)
    ? await registry.create(condition.adapter, condition.config as Record<string, JsonValue>, context)
    : undefined;
  const holds = async (ctx: PipelineContext): Promise<boolean> => {
    if (judge === undefined) {
      return evaluatePredicate(
        condition as Exclude<ConditionConfig, { adapter: string }>,
        ctx.message,
        ctx.envelope.headers,
      );
    }
    const result = await judge.process(ctx);
    if (result.error !== undefined) {
      throw new PipelineError(
        "adapter_failed",
        `[factflow/engine] condition "${judge.type}" of step "${adapter.type}" failed: ${result.error}`,
        { retryable: result.retryable ?? true },
      );
    }
    return result.data !== false;
  };
  return {
    type: adapter.type,
    async process(ctx) {
      if (!(await holds(ctx))) return { data: ctx.message, metadata: { [SKIPPED_STEP_METADATA]: true } };
      return adapter.process(ctx);
    },
    close: async () => {
      await judge?.close?.();
      await adapter.close?.();
    },
  };
}
