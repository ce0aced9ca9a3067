import type { ExecutionRecord, LineageRow, RouteStatusCount } from "@factflow/protocols";

/** Inputs larger than this are left out of an execution's detail; `GET .../input` serves them whole. */
export const DETAIL_INPUT_LIMIT_BYTES = 65_536;

/** The `input` fields of an execution's detail: inline when small, otherwise its size and where to get it. */
export function inputJson(record: ExecutionRecord) {
  const bytes = record.input === null ? 0 : Buffer.byteLength(JSON.stringify(record.input), "utf8");
  if (bytes <= DETAIL_INPUT_LIMIT_BYTES) return { input: record.input, input_bytes: bytes };
  return {
    input: null,
    input_bytes: bytes,
    input_omitted: `over ${DETAIL_INPUT_LIMIT_BYTES} bytes; GET /api/v1/executions/${record.id}/input`,
  };
}

/**
 * An execution as the API shows it (snake_case, like request bodies). Lists carry no input: it can
 * be large, and a page of fifty of them would be a large response.
 */
export function executionJson(record: ExecutionRecord, options: { snapshot?: boolean } = {}) {
  return {
    id: record.id,
    status: record.status,
    config_name: record.configName,
    config_version: record.configVersion,
    error: record.error,
    parent_execution_id: record.parentExecutionId,
    replay_from_route: record.replayFromRoute,
    created_at: record.createdAt,
    finished_at: record.finishedAt,
    counters: record.counters,
    ...(options.snapshot === true ? { config_snapshot: record.configSnapshot } : {}),
  };
}

/** Per-route counts: `{ route: { messages: {status: n}, adapters: {status: n} } }`. */
export function routeCountsJson(counts: readonly RouteStatusCount[]) {
  const out: Record<string, { messages: Record<string, number>; adapters: Record<string, number> }> = {};
  for (const row of counts) {
    const entry = out[row.route] ?? { messages: {}, adapters: {} };
    out[row.route] = entry;
    const bucket = row.kind === "message" ? entry.messages : entry.adapters;
    bucket[row.status] = (bucket[row.status] ?? 0) + row.count;
  }
  return out;
}

/** A lineage row as the API shows it. */
export function lineageJson(row: LineageRow) {
  return {
    id: row.id,
    execution_id: row.executionId,
    kind: row.kind,
    route: row.route,
    adapter: row.adapter ?? null,
    adapter_index: row.adapterIndex ?? null,
    message_id: row.messageId,
    correlation_id: row.correlationId,
    parent_id: row.parentId ?? null,
    attempt: row.attempt,
    status: row.status,
    input_hash: row.inputHash ?? null,
    payload: row.payload ?? null,
    output_keys: row.outputKeys ?? [],
    error: row.error ?? null,
    started_at: row.startedAt,
    finished_at: row.finishedAt ?? null,
    // Columns whose NUL characters were stored escaped as `\u0000` (docs/lineage.md); usually none.
    sanitised: row.sanitised ?? [],
  };
}
