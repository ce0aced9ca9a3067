import { PipelineError } from "@factflow/protocols";

/** `OrchestratorManager.start` was called with `maxConcurrent` executions already running. */
export class TooManyConcurrentExecutionsError extends PipelineError {
  constructor(readonly limit: number) {
    super(
      "too_many_executions",
      `[factflow/engine] ${limit} executions are already running (max_concurrent=${limit}); wait for one to finish or raise maxConcurrent`,
      { retryable: true },
    );
    setName(this, "TooManyConcurrentExecutionsError");
  }
}

/** No execution with this id exists (or it is not running, for operations that need it running). */
export class ExecutionNotFoundError extends PipelineError {
  constructor(
    readonly executionId: string,
    detail = "does not exist",
  ) {
    super("execution_not_found", `[factflow/engine] execution "${executionId}" ${detail}`);
    setName(this, "ExecutionNotFoundError");
  }
}

/**
 * Class name recorded in lineage when a handler was cancelled mid-chain (shutdown, timeout,
 * cancellation); the broker redelivers the message.
 */
export const DELIVERY_ABANDONED = "DeliveryAbandoned";

/** Why an execution was aborted by a fatal adapter result. */
export class FatalAdapterError extends PipelineError {
  constructor(
    readonly route: string,
    readonly adapter: string,
    detail: string,
  ) {
    super(
      "adapter_failed",
      `[factflow/engine] adapter "${adapter}" on route "${route}" reported a fatal error: ${detail}`,
    );
    setName(this, "FatalAdapterError");
  }
}

/** `PipelineError` types `name` as a literal, so subclasses set their own name at run time. */
function setName(error: Error, name: string): void {
  Object.defineProperty(error, "name", {
    value: name,
    enumerable: false,
    configurable: true,
    writable: false,
  });
}
