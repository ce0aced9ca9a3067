import {
  type FactflowError,
  isFactflowError,
  type JsonValue,
  type LineageErrorInfo,
  type LineageRow,
} from "@factflow/protocols";

/** The `message` row of a message about to be published to `route`. Its id is the message id. */
export function messageRow(input: {
  executionId: string;
  route: string;
  messageId: string;
  correlationId: string;
  payload: JsonValue;
  parentId?: string;
}): LineageRow {
  return {
    id: input.messageId,
    executionId: input.executionId,
    kind: "message",
    route: input.route,
    messageId: input.messageId,
    correlationId: input.correlationId,
    ...(input.parentId === undefined ? {} : { parentId: input.parentId }),
    attempt: 1,
    status: "pending",
    payload: input.payload,
    startedAt: new Date().toISOString(),
  };
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
    ...overrides,
  };
}

export function truncate(text: string, max = 2000): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
