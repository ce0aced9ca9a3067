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
  /** Message rows: the message whose adapter row `parent_id` names (the tree's walk up). */
  parent_message_id: string | null;
  /**
   * Message rows: settled adapter rows of this message written inside it (column `invocations`)
   * instead of as rows of their own. Null when there are none.
   */
  invocations: PendingRow[] | null;
}

/** A queued change to a row written in an earlier batch (null = keep the stored value). */
export interface PendingUpdate {
  id: string;
  status: LineageStatus;
  output_keys: readonly string[] | null;
  error: LineageErrorInfo | null;
  finished_at: string | null;
  attempt: number | null;
  /** Settled adapter rows to add to the row's `invocations` (merged by id with the stored ones). */
  invocations: PendingRow[] | null;
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
    parent_message_id: row.parentMessageId ?? null,
    invocations: null,
  };
}

/**
 * The stored form of folded adapter rows: one object per row with the columns an adapter row has of
 * its own (the message row supplies execution_id, route, message_id and correlation_id), absent
 * values left out. The `lineage_rows` view reads them back as rows.
 */
export function invocationsJson(rows: readonly PendingRow[]): Record<string, unknown>[] {
  return rows.map((r) => {
    const o: Record<string, unknown> = { id: r.id };
    if (r.adapter !== null) o.adapter = r.adapter;
    if (r.adapter_index !== null) o.adapter_index = r.adapter_index;
    if (r.parent_id !== null) o.parent_id = r.parent_id;
    o.attempt = r.attempt;
    o.status = r.status;
    if (r.input_hash !== null) o.input_hash = r.input_hash;
    if (r.output_keys !== null) o.output_keys = r.output_keys;
    if (r.error !== null) o.error = r.error;
    o.started_at = r.started_at;
    if (r.finished_at !== null) o.finished_at = r.finished_at;
    return o;
  });
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

/**
 * The columns of a lineage row in statement order, each with the element type of the array it
 * travels in. JSON columns travel as text and are cast to jsonb per element.
 */
const INSERT_COLUMNS = [
  ["id", "uuid"],
  ["execution_id", "uuid"],
  ["kind", "text"],
  ["route", "text"],
  ["adapter", "text"],
  ["adapter_index", "integer"],
  ["message_id", "text"],
  ["correlation_id", "text"],
  ["parent_id", "uuid"],
  ["attempt", "integer"],
  ["status", "text"],
  ["input_hash", "text"],
  ["payload", "json"],
  ["output_keys", "json"],
  ["error", "json"],
  ["started_at", "timestamptz"],
  ["finished_at", "timestamptz"],
  ["parent_message_id", "text"],
  ["invocations", "json"],
] as const satisfies readonly (readonly [keyof PendingRow, string])[];

const UPDATE_COLUMNS = [
  ["id", "uuid"],
  ["status", "text"],
  ["output_keys", "json"],
  ["error", "json"],
  ["finished_at", "timestamptz"],
  ["attempt", "integer"],
  ["invocations", "json"],
] as const satisfies readonly (readonly [keyof PendingUpdate, string])[];

/** `unnest($1::uuid[], $2::text[], …) as alias(col, …)` over `columns`, parameters from `$1`. */
function unnestOf(columns: readonly (readonly [string, string])[], alias: string): string {
  const arrays = columns.map(([, type], i) => `$${i + 1}::${type === "json" ? "text" : type}[]`);
  return `unnest(${arrays.join(", ")}) as ${alias}(${columns.map(([name]) => name).join(", ")})`;
}

/** The select list of an unnest: JSON columns cast from text to jsonb. */
function selectOf(columns: readonly (readonly [string, string])[], alias: string): string {
  return columns
    .map(([name, type]) => (type === "json" ? `${alias}.${name}::jsonb` : `${alias}.${name}`))
    .join(", ");
}

// The batch travels as one array parameter per column, expanded server-side by unnest: a fixed
// number of parameters whatever the batch size, and about a fifth of the server's parse cost of a
// JSON record set (json_to_recordset takes ~19 µs per row on PostgreSQL 15, unnest ~4 µs).
function plainInsertSql(columns: readonly (readonly [string, string])[]): string {
  return `insert into lineage (${columns.map(([name]) => name).join(", ")})
select ${selectOf(columns, "r")}
from ${unnestOf(columns, "r")}`;
}

/**
 * The plain insert of `columns` as an upsert that never takes a stored row back (see statusRank).
 * Folded adapter rows are never dropped: a row that is not further along still adds its
 * `invocations` to the stored ones (merged by id, so a batch sent twice adds nothing).
 */
function upsertSql(columns: readonly (readonly [string, string])[]): string {
  const ahead = `(excluded.attempt, ${statusRank("excluded.status")}) >= (lineage.attempt, ${statusRank("lineage.status")})`;
  const set = columns
    .filter(([name]) => name !== "id" && name !== "execution_id")
    .map(([name]) => {
      if (name === "invocations")
        return "invocations = factflow_merge_invocations(lineage.invocations, excluded.invocations)";
      if (name === "parent_message_id")
        return `parent_message_id = coalesce(excluded.parent_message_id, lineage.parent_message_id)`;
      return `${name} = case when ${ahead} then excluded.${name} else lineage.${name} end`;
    })
    .join(", ");
  return `${plainInsertSql(columns)}
on conflict (id) do update set ${set}
where ${ahead} or excluded.invocations is not null`;
}

const PLAIN_INSERT_SQL = plainInsertSql(INSERT_COLUMNS);

const INSERT_SQL = upsertSql(INSERT_COLUMNS);

/** An update's folded adapter rows join the stored ones (the function only runs when it carries some). */
const MERGE_INVOCATIONS = `invocations = case when u.invocations is null then l.invocations
    else factflow_merge_invocations(l.invocations, u.invocations::jsonb) end`;

// Each queued update finds its row through the primary key, whatever the sizes of the batch and the
// table. Joined on `l.id = u.id`, a batch of more than about a thousand updates is planned as a hash
// join that reads the whole table first: for 2000 updates on a table of 120 000 rows, 190 ms on PGlite
// (whose unnamed statements are planned with each batch's real size) and 100 ms on PostgreSQL,
// against 110 and 36–46 ms through the key (`pnpm bench lineage-update`), and growing with the table.
// `= any(array[u.id])` selects the same row, but neither a hash nor a merge join can use it, so one
// primary-key probe per update is the only plan left, with the same row estimates as the equality (a
// pair of range conditions did the same, but their estimate of thousands of rows per probe made
// PostgreSQL compile each batch with JIT, 130–210 ms). test/update-plan.integration.test.ts pins it.
const UPDATE_SQL = `update lineage as l set status = u.status,
  output_keys = coalesce(u.output_keys::jsonb, l.output_keys), error = coalesce(u.error::jsonb, l.error),
  finished_at = coalesce(u.finished_at, l.finished_at), attempt = coalesce(u.attempt, l.attempt),
  ${MERGE_INVOCATIONS}
from ${unnestOf(UPDATE_COLUMNS, "u")}
where l.id = any(array[u.id])`;

/** A statement and its parameters. */
export interface Statement {
  readonly text: string;
  readonly params: readonly unknown[];
}

/**
 * One PostgreSQL array literal per column (`{"a","b",NULL}`): JSON values as their text, absent
 * values as NULL. Every element is quoted, with `"` and `\` escaped, so no value can end an element
 * early or read as NULL. Built here rather than by the driver, which escapes every element with two
 * regular expressions; both drivers pass a string parameter through as it is.
 */
function columnArrays<T>(items: readonly T[], columns: readonly (readonly [keyof T, string])[]): string[] {
  return columns.map(([name, type]) => {
    let literal = "{";
    for (let i = 0; i < items.length; i++) {
      if (i > 0) literal += ",";
      const value = (items[i] as T)[name];
      if (value === null || value === undefined) literal += "NULL";
      else
        literal += quoteElement(
          type !== "json"
            ? String(value)
            : JSON.stringify(name === "invocations" ? invocationsJson(value as PendingRow[]) : value),
        );
    }
    return `${literal}}`;
  });
}

/** A PostgreSQL array literal of `values`, every element quoted (see columnArrays). */
export function arrayLiteral(values: readonly string[]): string {
  return `{${values.map(quoteElement).join(",")}}`;
}

function quoteElement(text: string): string {
  if (text.includes('"') || text.includes("\\")) return `"${text.replace(/["\\]/g, "\\$&")}"`;
  return `"${text}"`;
}

/** One multi-row upsert of `rows`. */
export function insertRowsStatement(rows: readonly PendingRow[]): Statement {
  return { text: INSERT_SQL, params: columnArrays(rows, INSERT_COLUMNS) };
}

/** The upsert of the rows a {@link plainInsertRowsStatement} carries, with the same parameters. */
export function asUpsert(plain: Statement): Statement {
  return { text: INSERT_SQL, params: plain.params };
}

/**
 * The same rows as a plain INSERT, without the upsert's conflict check: PostgreSQL then skips the
 * speculative insertion (a primary-key probe before each row and a second pass over the arbiter
 * index). It fails as a whole with unique_violation when one of the ids is already stored; the
 * caller then sends the upsert, as it does after a COPY. Same parameters as {@link insertRowsStatement}.
 */
export function plainInsertRowsStatement(rows: readonly PendingRow[]): Statement {
  return { text: PLAIN_INSERT_SQL, params: columnArrays(rows, INSERT_COLUMNS) };
}

/** One batched update; each id appears at most once (the writer merges before). */
export function updateRowsStatement(updates: readonly PendingUpdate[]): Statement {
  return { text: UPDATE_SQL, params: columnArrays(updates, UPDATE_COLUMNS) };
}

// A row or update the database refused for its NUL characters goes again, escaped, on its own,
// with the columns it escaped (nul-escape.ts). Rare, so the batch statements above stay as they are.
const SANITISED_INSERT_COLUMNS = [...INSERT_COLUMNS, ["sanitised", "json"]] as const;

const SANITISED_INSERT_SQL = upsertSql(SANITISED_INSERT_COLUMNS);

const SANITISED_UPDATE_COLUMNS = [...UPDATE_COLUMNS, ["sanitised", "json"]] as const;

const SANITISED_UPDATE_SQL = `update lineage as l set status = u.status,
  output_keys = coalesce(u.output_keys::jsonb, l.output_keys), error = coalesce(u.error::jsonb, l.error),
  finished_at = coalesce(u.finished_at, l.finished_at), attempt = coalesce(u.attempt, l.attempt),
  ${MERGE_INVOCATIONS},
  sanitised = coalesce(l.sanitised, '[]'::jsonb) || u.sanitised::jsonb
from ${unnestOf(SANITISED_UPDATE_COLUMNS, "u")}
where l.id = any(array[u.id])`;

/** The upsert of one row whose NULs were escaped, recording the escaped `columns`. */
export function insertSanitisedRowStatement(row: PendingRow, columns: readonly string[]): Statement {
  return {
    text: SANITISED_INSERT_SQL,
    params: columnArrays([{ ...row, sanitised: columns }], SANITISED_INSERT_COLUMNS),
  };
}

/** The update of one row whose NULs were escaped, adding the escaped `columns` to the row's list. */
export function updateSanitisedRowStatement(update: PendingUpdate, columns: readonly string[]): Statement {
  return {
    text: SANITISED_UPDATE_SQL,
    params: columnArrays([{ ...update, sanitised: columns }], SANITISED_UPDATE_COLUMNS),
  };
}
