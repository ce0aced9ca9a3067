import {
  type FactflowError,
  isFactflowError,
  type JsonValue,
  type LineageErrorInfo,
  type LineageRow,
} from "@factflow/protocols";
import { nowIso } from "../ids.js";

/** The `message` row of a message about to be published to `route`. Its id is the message id. */
export function messageRow(input: {
  executionId: string;
  route: string;
  messageId: string;
  correlationId: string;
  payload: JsonValue;
  parentId?: string | undefined;
  /** The message whose delivery produced this one (the message of the adapter row `parentId`). */
  parentMessageId?: string | undefined;
}): LineageRow {
  const row: { -readonly [K in keyof LineageRow]: LineageRow[K] } = {
    id: input.messageId,
    executionId: input.executionId,
    kind: "message",
    route: input.route,
    messageId: input.messageId,
    correlationId: input.correlationId,
    attempt: 1,
    status: "pending",
    payload: input.payload,
    startedAt: nowIso(),
  };
  if (input.parentId !== undefined) row.parentId = input.parentId;
  if (input.parentMessageId !== undefined) row.parentMessageId = input.parentMessageId;
  return row;
}

/** Describes a thrown value for lineage; a thrown `FactflowError` keeps its own `retryable`. */
export function errorInfoOf(error: unknown, overrides: Partial<LineageErrorInfo> = {}): LineageErrorInfo {
  const isError = error instanceof Error;
  const retryable = isFactflowError(error) ? (error as FactflowError).retryable : true;
  return {
    class: isError ? error.name : typeof error,
    message: truncate(isError ? error.message : String(error)),
    retryable,
    fatal: false,
    ...(isError && typeof error.stack === "string" ? { stack: truncate(error.stack, STACK_MAX) } : {}),
    ...overrides,
  };
}

/** A stack is kept whole up to here: deep enough for any real trace, small next to a lineage row. */
const STACK_MAX = 8000;

export function truncate(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
