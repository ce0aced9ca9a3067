import { randomBytes } from "node:crypto";
import type { Delivery } from "@factflow/protocols";
import type { ExecutionRuntime } from "../runtime.js";
import { errorInfoOf, messageRow } from "./lineage-rows.js";

/**
 * Header on a message whose `message` lineage row was only queued in the publisher's group-commit
 * writer when it was published (no strict lineage: `record`, not `registerPending`). Its value is
 * `<run id> <parent message id>`: the orchestrator run that queued the row, and the message whose
 * delivery published it.
 *
 * Such a row is durable a few milliseconds after the publish, so a process that dies in between
 * (kill -9, power loss) loses it while the broker keeps the message. After the restart another run
 * handles the message, and its adapter rows would point at a message without its row.
 */
export const QUEUED_ROW_HEADER = "x-factflow-row-queued-by";

const SPACE = 0x20;

/** The header's value for a row queued by this run while handling `parentMessageId`. */
export function queuedRowHeader(runtime: ExecutionRuntime, parentMessageId: string): string {
  return `${runtime.runId} ${parentMessageId}`;
}

/** A run id: 64 random bits, short, since it travels in every message of a run without strict lineage. */
export function newRunId(): string {
  return randomBytes(8).toString("base64url");
}

/**
 * Records the delivery's `message` row again when another run queued it and it is not stored (see
 * {@link QUEUED_ROW_HEADER}). Returns `undefined` at once for every other delivery (a row this run
 * queued is ahead of every later change in the same writer; a row registered durably carries no
 * header), otherwise a promise that settles once the row is queued (it never rejects).
 */
export function restoreQueuedRow(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
): Promise<void> | undefined {
  const value = delivery.message.headers[QUEUED_ROW_HEADER];
  if (value === undefined) return undefined;
  // Queued by this run (every delivery of a run without strict lineage asks): no string is made.
  const runId = runtime.runId;
  if (value.charCodeAt(runId.length) === SPACE && value.startsWith(runId)) return undefined;
  const space = value.indexOf(" ");
  return restore(runtime, route, delivery, space < 0 ? undefined : value.slice(space + 1));
}

async function restore(
  runtime: ExecutionRuntime,
  route: string,
  delivery: Delivery,
  parentMessageId: string | undefined,
): Promise<void> {
  const { lineage, executionId, logger } = runtime;
  const envelope = delivery.message;
  if (lineage.messageStatus !== undefined) {
    try {
      // Stored (the common case: the run that queued it ended cleanly): nothing to do, and
      // nothing to overwrite.
      if ((await lineage.messageStatus(executionId, envelope.id)) !== undefined) return;
    } catch (error) {
      // Recording it again is safe (the upsert keeps a stored row that is further along).
      logger.warn("could not read the lineage row of a message queued by another run; recording it again", {
        route,
        messageId: envelope.id,
        error: errorInfoOf(error).message,
      });
    }
  }
  // Rebuilt from the message itself. Its parent is the message row of the message it came from,
  // not the adapter row named in `x-lineage-parent`: that one was queued in the same writer just
  // before this row, so it is lost whenever this row is, while the parent message's row was queued
  // before the parent was even published (or registered durably, for a fan-out child).
  const row = messageRow({
    executionId,
    route,
    messageId: envelope.id,
    correlationId: envelope.correlationId,
    payload: envelope.body,
    parentId: parentMessageId,
    parentMessageId,
  });
  try {
    lineage.record(delivery.attempt === 1 ? row : { ...row, attempt: delivery.attempt });
  } catch (error) {
    // Lineage never fails a delivery (a closed store, a malformed id from a foreign publisher).
    logger.warn("could not record the lineage row of a message queued by another run", {
      route,
      messageId: envelope.id,
      error: errorInfoOf(error).message,
    });
  }
}
