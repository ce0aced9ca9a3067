import { TraceAttribute as A, type PipelineConfig, type Tracer, type TraceSpan } from "@factflow/protocols";
import type { OrchestratorEnd } from "./pipeline-orchestrator.js";

/**
 * Starts the span of one execution run in this process. Its parent is the caller's active context:
 * the HTTP request that started (or replayed, or resumed) the execution, when that request carried a
 * `traceparent` and the application made it active. Seed messages carry this span's context.
 */
export function startExecutionSpan(
  tracer: Tracer,
  executionId: string,
  config: PipelineConfig,
  seed: string,
): TraceSpan {
  return tracer.startSpan(`execution ${config.name}`, {
    attributes: {
      [A.executionId]: executionId,
      [A.pipeline]: config.name,
      [A.seed]: seed === "none" || seed === "reseed" ? "resume" : seed === "inputs" ? "replay" : "start",
    },
  });
}

/** Ends an execution's span with its final status (`stopped`: this process shut down, the run goes on). */
export function endExecutionSpan(span: TraceSpan, end: OrchestratorEnd, error: string | undefined): void {
  span.end({
    ok: end === "completed" || end === "stopped",
    ...(error === undefined ? {} : { message: error }),
    attributes: { [A.outcome]: end },
  });
}
