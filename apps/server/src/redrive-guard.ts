import { parseScopedDestination } from "@factflow/engine";
import { isUuid } from "@factflow/lineage";
import type { ExecutionRecord, ExecutionStoreProtocol } from "@factflow/protocols";
import { ExecutionNotRunningError, HttpProblem } from "./http-errors.js";

/**
 * The execution that owns a destination, from its scoped name `/queue/<execution_id>/<queue>` (see
 * `parseScopedDestination`). Undefined for unscoped queues, for topics, and for a scope that is not
 * an execution id (execution ids are UUIDs; the MQ diagnostic's scratch scope, for one, is not).
 */
export function executionOfDestination(destination: string): string | undefined {
  const executionId = parseScopedDestination(destination)?.executionId;
  return executionId !== undefined && isUuid(executionId) ? executionId : undefined;
}

/** The owning execution of `destination` and its record, or undefined when no check applies. */
async function owningExecution(
  executions: ExecutionStoreProtocol,
  destination: string,
  force: boolean,
): Promise<{ executionId: string; record: ExecutionRecord | undefined } | undefined> {
  if (force) return undefined;
  const executionId = executionOfDestination(destination);
  if (executionId === undefined) return undefined;
  return { executionId, record: await executions.getExecution(executionId, { includeInput: false }) };
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
  const owner = await owningExecution(executions, destination, force);
  if (owner === undefined || owner.record?.status === "running") return;
  const { executionId, record } = owner;
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

/**
 * Refuses to purge the queue of a running execution: its messages are work the execution waits
 * for, so purging them leaves it waiting on messages that will never come (it then stalls, and
 * needs cancelling). Unscoped queues and queues of executions that are over are always allowed;
 * `force` skips the check for an operator who means to drop that work.
 *
 * @throws HttpProblem (HTTP 409 `execution_running`)
 */
export async function assertPurgeAllowed(
  executions: ExecutionStoreProtocol,
  destination: string,
  force: boolean,
): Promise<void> {
  const owner = await owningExecution(executions, destination, force);
  if (owner === undefined || owner.record?.status !== "running") return;
  const { executionId } = owner;
  throw new HttpProblem(
    409,
    "execution_running",
    `[factflow/server] execution ${executionId} is running and waits for the messages in ${destination}: ` +
      `purging them leaves it waiting for work that never comes. Cancel it first ` +
      `(POST /api/v1/executions/${executionId}/cancel), or pass "force": true to purge anyway`,
  );
}
