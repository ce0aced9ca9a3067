import { parseScopedDestination } from "@factflow/engine";
import { isUuid } from "@factflow/lineage";
import type { ExecutionStoreProtocol } from "@factflow/protocols";
import { ExecutionNotRunningError } from "./http-errors.js";

/**
 * The execution that owns a destination, from its scoped name `/queue/<execution_id>/<queue>` (see
 * `parseScopedDestination`). Undefined for unscoped queues, for topics, and for a scope that is not
 * an execution id (execution ids are UUIDs; the MQ diagnostic's scratch scope, for one, is not).
 */
export function executionOfDestination(destination: string): string | undefined {
  const executionId = parseScopedDestination(destination)?.executionId;
  return executionId !== undefined && isUuid(executionId) ? executionId : undefined;
}

/**
 * Refuses to redrive dead letters into the queue of an execution that is not running: its
 * subscriptions are gone, so the messages would wait forever while the call reported success.
 * Unscoped queues (not owned by an execution) are always allowed; `force` skips the check for an
 * operator who will consume the queue by other means.
 *
 * @throws ExecutionNotRunningError (HTTP 409 `execution_not_running`)
 */
export async function assertRedriveAllowed(
  executions: ExecutionStoreProtocol,
  destination: string,
  force: boolean,
): Promise<void> {
  if (force) return;
  const executionId = executionOfDestination(destination);
  if (executionId === undefined) return;
  const record = await executions.getExecution(executionId);
  if (record?.status === "running") return;
  const state = record === undefined ? "unknown (never created here, or pruned)" : record.status;
  throw new ExecutionNotRunningError(
    executionId,
    record?.status ?? "unknown",
    `[factflow/server] execution ${executionId} is ${state}: nothing consumes ${destination} any more, ` +
      `so redriven messages would never be processed. Re-run the failed messages with ` +
      `POST /api/v1/executions/${executionId}/replay {"from_route": ...} (CLI: factflow replay ${executionId} --from ROUTE), ` +
      `or pass "force": true (CLI: --force) to redrive anyway`,
  );
}
