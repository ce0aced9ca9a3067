import type { ExecutionRecord, Logger } from "@factflow/protocols";
import type { StallDiagnosis } from "../stall/stall-diagnosis.js";
import type { OrchestratorEnd } from "./pipeline-orchestrator.js";

/** How an execution ended in this process, beside its end. */
export interface ExecutionEndContext {
  /** This process owns the execution (see `ExecutionHooks.onExecutionEnded`). */
  readonly owner: boolean;
}

/**
 * Observers of the executions this process runs, for what the application keeps beside the engine
 * (metric labels, gauges, broker queue cleanup). Each is awaited, so keep them quick; an error or a
 * rejection is logged and never changes the execution.
 */
export interface ExecutionHooks {
  /**
   * An execution is about to run here (create, replay or resume): its row exists, and none of its
   * routes is subscribed yet, so nothing of it has been published or consumed in this process.
   */
  readonly onExecutionStarted?: (record: ExecutionRecord) => void | Promise<void>;
  /**
   * An execution that `onExecutionStarted` announced stopped running here. Its subscriptions are
   * stopped; for a final status its row is marked and the final event emitted. `stopped` means the
   * process shut down and left the row `running`, to be resumed: its queues still hold its messages.
   * `record` is the row as it was at the start. `context.owner` is true when this process owns the
   * execution (always outside a cluster; in a cluster, the server that created it, took it over or
   * claimed it): the one that cleans its queues.
   */
  readonly onExecutionEnded?: (
    record: ExecutionRecord,
    end: OrchestratorEnd,
    context: ExecutionEndContext,
  ) => void | Promise<void>;
  /**
   * An execution running here has made no progress for the engine's `stallAfterMs`: told once per
   * stall, with what it is waiting for. It is told again only after the execution has moved and
   * stalled anew.
   */
  readonly onExecutionStalled?: (record: ExecutionRecord, diagnosis: StallDiagnosis) => void | Promise<void>;
}

/** Runs one hook; its failure is logged, never thrown. */
export async function callHook(
  logger: Logger,
  name: keyof ExecutionHooks,
  executionId: string,
  call: () => void | Promise<void>,
): Promise<void> {
  try {
    await call();
  } catch (error) {
    logger.error(`execution hook ${name} failed`, {
      executionId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}
