import type { LineageErrorInfo, LineageRow, LineageStatus } from "@factflow/protocols";

/** A row as the writer holds it: a mutable copy so later updates in the same batch merge in. */
export interface PendingRow {
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
  status: LineageStatus;
  input_hash: string | null;
  payload: unknown;
  output_keys: readonly string[] | null;
  error: LineageErrorInfo | null;
  started_at: string;
  finished_at: string | null;
}

/** A queued change to a row written in an earlier batch (null = keep the stored value). */
export interface PendingUpdate {
  id: string;
  status: LineageStatus;
  output_keys: readonly string[] | null;
  error: LineageErrorInfo | null;
  finished_at: string | null;
  attempt: number | null;
}

export function toPendingRow(row: LineageRow): PendingRow {
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
    output_keys: row.outputKeys ?? null,
    error: row.error ?? null,
    started_at: row.startedAt,
    finished_at: row.finishedAt ?? null,
  };
}

/**
 * How far along a status is within one attempt. The upsert's guard compares (attempt, rank): an
 * insert that meets a stored row (a retried batch whose first attempt did commit, a row recorded
 * again, a timed-out statement that still commits late) only overwrites it when it is at least as
 * far along, so it can never take back an update that landed in between (pending over completed,
 * or an older attempt over a retry's `pending`, which restarts at a higher attempt).
 */
function statusRank(column: string): string {
  return `(case ${column} when 'pending' then 0 when 'initiated' then 1 when 'processing' then 2 else 3 end)`;
}

// The whole batch travels as ONE text parameter expanded server-side by json_to_recordset: no
// 65535-parameter limit, one parse per batch, and identical behaviour on node-postgres and PGlite.
// `$1::text::json` pins the parameter type to text so neither driver re-encodes the string.
const INSERT_SQL = `insert into lineage (id, execution_id, kind, route, adapter, adapter_index, message_id,
  correlation_id, parent_id, attempt, status, input_hash, payload, output_keys, error, started_at, finished_at)
select id, execution_id, kind, route, adapter, adapter_index, message_id, correlation_id, parent_id, attempt,
  status, input_hash, payload, output_keys, error, started_at, finished_at
from json_to_recordset($1::text::json) as r(id uuid, execution_id uuid, kind text, route text, adapter text,
  adapter_index integer, message_id text, correlation_id text, parent_id uuid, attempt integer, status text,
  input_hash text, payload jsonb, output_keys jsonb, error jsonb, started_at timestamptz, finished_at timestamptz)
on conflict (id) do update set kind = excluded.kind, route = excluded.route, adapter = excluded.adapter,
  adapter_index = excluded.adapter_index, message_id = excluded.message_id,
  correlation_id = excluded.correlation_id, parent_id = excluded.parent_id, attempt = excluded.attempt,
  status = excluded.status, input_hash = excluded.input_hash, payload = excluded.payload,
  output_keys = excluded.output_keys, error = excluded.error, started_at = excluded.started_at,
  finished_at = excluded.finished_at
where (excluded.attempt, ${statusRank("excluded.status")}) >= (lineage.attempt, ${statusRank("lineage.status")})`;

const UPDATE_SQL = `update lineage as l set status = u.status,
  output_keys = coalesce(u.output_keys, l.output_keys), error = coalesce(u.error, l.error),
  finished_at = coalesce(u.finished_at, l.finished_at), attempt = coalesce(u.attempt, l.attempt)
from json_to_recordset($1::text::json) as u(id uuid, status text, output_keys jsonb, error jsonb,
  finished_at timestamptz, attempt integer)
where l.id = u.id`;

// The planner cannot see how many rows json_to_recordset yields (it assumes 100), so for a small
// batch on a table of a few thousand rows it picks a sequential scan and a hash join. Repeating the
// ids as a literal array lets it count them and go through the primary key: about half the cost of
// a 16-row update on PGlite (the strict-lineage case, one small commit per hop). Large batches keep
// the plain statement, where the scan is the cheaper plan anyway.
const SMALL_UPDATE = 100;
const UPDATE_BY_IDS_SQL = `${UPDATE_SQL} and l.id = any(string_to_array($2::text, ',')::uuid[])`;

/** A statement and its parameters. */
export interface Statement {
  readonly text: string;
  readonly params: readonly unknown[];
}

/** One multi-row upsert of `rows`. */
export function insertRowsStatement(rows: readonly PendingRow[]): Statement {
  return { text: INSERT_SQL, params: [JSON.stringify(rows)] };
}

/** The lineage columns in the order {@link copyRowsCsv} writes them. */
const COPY_COLUMNS = [
  "id",
  "execution_id",
  "kind",
  "route",
  "adapter",
  "adapter_index",
  "message_id",
  "correlation_id",
  "parent_id",
  "attempt",
  "status",
  "input_hash",
  "payload",
  "output_keys",
  "error",
  "started_at",
  "finished_at",
] as const satisfies readonly (keyof PendingRow)[];

const JSON_COLUMNS: ReadonlySet<string> = new Set(["payload", "output_keys", "error"]);
/** Per column of {@link COPY_COLUMNS}: whether it holds JSON (looked up once, not per value). */
const IS_JSON_COLUMN: readonly boolean[] = COPY_COLUMNS.map((column) => JSON_COLUMNS.has(column));

/**
 * `COPY … FROM` a CSV of {@link copyRowsCsv}: a plain insert, so a batch holding an id that already
 * exists fails with unique_violation (23505) and the writer falls back to the upsert.
 */
export const COPY_ROWS_SQL = `copy lineage (${COPY_COLUMNS.join(", ")}) from '/dev/blob' with (format csv)`;

/**
 * The rows as CSV for {@link COPY_ROWS_SQL}. PGlite parses CSV far faster than it expands a JSON
 * document into a record set (about 40% less time per row). Every value is quoted, so an empty
 * string stays distinct from NULL (an unquoted empty field) and a `\.` value is never read as the
 * end-of-data marker. Throws a TypeError like `JSON.stringify` for values JSON cannot hold.
 */
export function copyRowsCsv(rows: readonly PendingRow[]): string {
  const lines: string[] = new Array(rows.length);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r] as PendingRow;
    let line = "";
    for (let c = 0; c < COPY_COLUMNS.length; c++) {
      const column = COPY_COLUMNS[c] as (typeof COPY_COLUMNS)[number];
      const value = row[column];
      if (c > 0) line += ",";
      if (value === null || value === undefined) continue;
      const text = IS_JSON_COLUMN[c] === true ? JSON.stringify(value) : String(value);
      line += text.includes('"') ? `"${text.replaceAll('"', '""')}"` : `"${text}"`;
    }
    lines[r] = line;
  }
  return lines.join("\n");
}

/** One batched update; each id appears at most once (the writer merges before). */
export function updateRowsStatement(updates: readonly PendingUpdate[]): Statement {
  if (updates.length > SMALL_UPDATE) return { text: UPDATE_SQL, params: [JSON.stringify(updates)] };
  return {
    text: UPDATE_BY_IDS_SQL,
    params: [JSON.stringify(updates), updates.map((u) => u.id).join(",")],
  };
}
