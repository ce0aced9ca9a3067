import type { LineageRow, LineageTreeQuery } from "@factflow/protocols";
import { DEFAULT_LINEAGE_TREE_LIMIT, FactflowError } from "@factflow/protocols";
import { assertUuid } from "./ids.js";

export const LINEAGE_KINDS: ReadonlySet<string> = new Set(["message", "adapter"]);
export const LINEAGE_STATUSES: ReadonlySet<string> = new Set([
  "pending",
  "initiated",
  "processing",
  "completed",
  "failed",
  "abandoned",
  "skipped",
]);

/** Rejects a row no store could hold (malformed ids, unknown kind or status). */
export function checkRow(row: LineageRow): void {
  assertUuid(row.executionId, "execution id");
  checkRowOfKnownExecution(row);
}

/** {@link checkRow} without the execution id, for a caller that has checked it already. */
export function checkRowOfKnownExecution(row: LineageRow): void {
  assertUuid(row.id, "lineage row id");
  if (row.parentId !== undefined) assertUuid(row.parentId, "lineage parent id");
  if (!LINEAGE_KINDS.has(row.kind))
    invalid(`lineage kind ${JSON.stringify(row.kind)} is unknown (message | adapter)`);
  if (!LINEAGE_STATUSES.has(row.status)) invalid(`lineage status ${JSON.stringify(row.status)} is unknown`);
  checkMessageId(row.messageId);
}

export function checkMessageId(messageId: string): void {
  if (typeof messageId !== "string" || messageId.length === 0 || messageId.length > 512) {
    invalid("message id must be a non-empty string of at most 512 characters");
  }
}

/** The row limit of a tree query: a positive integer, by default {@link DEFAULT_LINEAGE_TREE_LIMIT}. */
export function treeLimitOf(query: LineageTreeQuery | undefined): number {
  const limit = query?.limit ?? DEFAULT_LINEAGE_TREE_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1) invalid("tree limit must be a positive integer");
  return limit;
}

export function invalid(message: string): never {
  throw new FactflowError("invalid_argument", `[factflow/lineage] ${message}.`);
}
