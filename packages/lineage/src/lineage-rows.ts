import type {
  JsonValue,
  LineageErrorInfo,
  LineageKind,
  LineageRow,
  LineageStatus,
} from "@factflow/protocols";

/** A lineage row as both drivers return it (timestamps as Date, JSON parsed). */
export interface StoredLineageRow {
  id: string;
  execution_id: string;
  kind: string;
  route: string;
  adapter: string | null;
  adapter_index: number | null;
  message_id: string;
  correlation_id: string;
  parent_id: string | null;
  attempt: number;
  status: string;
  input_hash: string | null;
  payload: unknown;
  output_keys: unknown;
  error: unknown;
  started_at: Date | string;
  finished_at: Date | string | null;
  /** Absent from rows read by a query that does not select it. */
  sanitised?: unknown;
}

export function iso(value: Date | string): string {
  return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

/** Maps a stored row to the protocol shape; absent values are left out, not set to undefined. */
export function fromStoredRow(r: StoredLineageRow): LineageRow {
  const row: { -readonly [K in keyof LineageRow]: LineageRow[K] } = {
    id: r.id,
    executionId: r.execution_id,
    kind: r.kind as LineageKind,
    route: r.route,
    messageId: r.message_id,
    correlationId: r.correlation_id,
    attempt: r.attempt,
    status: r.status as LineageStatus,
    startedAt: iso(r.started_at),
  };
  if (r.adapter !== null) row.adapter = r.adapter;
  if (r.adapter_index !== null) row.adapterIndex = r.adapter_index;
  if (r.parent_id !== null) row.parentId = r.parent_id;
  if (r.input_hash !== null) row.inputHash = r.input_hash;
  if (r.payload !== null && r.payload !== undefined) row.payload = r.payload as JsonValue;
  if (Array.isArray(r.output_keys)) row.outputKeys = r.output_keys as string[];
  if (r.error !== null && r.error !== undefined) row.error = r.error as LineageErrorInfo;
  if (r.finished_at !== null) row.finishedAt = iso(r.finished_at);
  // An update may add a column already listed by the insert: one entry each, in name order.
  if (Array.isArray(r.sanitised) && r.sanitised.length > 0)
    row.sanitised = [...new Set(r.sanitised as string[])].sort();
  return row;
}
