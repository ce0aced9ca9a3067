import type { PendingRow, PendingUpdate } from "./lineage-sql.js";

/**
 * PostgreSQL cannot store U+0000 in `text` (invalid byte sequence) nor in `jsonb` (unsupported
 * escape), so a row holding one is refused. Rather than losing the hop, the writer stores it with
 * every NUL replaced by the six characters `\u0000` and names the columns where that happened in
 * the row's `sanitised` column (docs/lineage.md, "Rows the database refuses").
 */
export const NUL_ESCAPE = "\\u0000";

const NUL = "\u0000";

/** Text columns a NUL can reach (ids, timestamps and numbers cannot hold one). */
const TEXT_COLUMNS = [
  "kind",
  "route",
  "adapter",
  "message_id",
  "correlation_id",
  "status",
  "input_hash",
  "parent_message_id",
] as const satisfies readonly (keyof PendingRow)[];

/** JSON columns of a row and of an update. */
const ROW_JSON_COLUMNS = ["payload", "output_keys", "error"] as const satisfies readonly (keyof PendingRow)[];
const UPDATE_JSON_COLUMNS = ["output_keys", "error"] as const satisfies readonly (keyof PendingUpdate)[];

/** A row or update with NULs escaped, and the columns that held one. */
export interface Sanitised<T> {
  readonly value: T;
  readonly columns: string[];
}

/** The row with every NUL escaped; undefined when it holds none (its refusal had another cause). */
export function sanitiseRow(row: PendingRow): Sanitised<PendingRow> | undefined {
  const value: PendingRow = { ...row };
  const columns: string[] = [];
  for (const column of TEXT_COLUMNS) {
    const text = row[column];
    if (text === null || !text.includes(NUL)) continue;
    (value as unknown as Record<string, string>)[column] = text.replaceAll(NUL, NUL_ESCAPE);
    columns.push(column);
  }
  for (const column of ROW_JSON_COLUMNS) {
    const escaped = escapeJson(row[column]);
    if (escaped === undefined) continue;
    (value as unknown as Record<string, unknown>)[column] = escaped;
    columns.push(column);
  }
  return columns.length === 0 ? undefined : { value, columns };
}

/** The update with every NUL escaped; undefined when it holds none. */
export function sanitiseUpdate(update: PendingUpdate): Sanitised<PendingUpdate> | undefined {
  const value: PendingUpdate = { ...update };
  const columns: string[] = [];
  for (const column of UPDATE_JSON_COLUMNS) {
    const escaped = escapeJson(update[column]);
    if (escaped === undefined) continue;
    (value as unknown as Record<string, unknown>)[column] = escaped;
    columns.push(column);
  }
  return columns.length === 0 ? undefined : { value, columns };
}

/** The JSON value with NULs escaped in every string and key; undefined when it holds none. */
function escapeJson(value: unknown): unknown {
  if (value === null || value === undefined) return undefined;
  const text = JSON.stringify(value) as string | undefined;
  // JSON text writes a NUL as the escape \u0000: no such escape, no NUL (a backslash followed by
  // "u0000" in the data also matches; escaping then changes nothing and the row is not sanitised).
  if (text === undefined || !text.includes(NUL_ESCAPE)) return undefined;
  let changed = false;
  const escaped = JSON.parse(text, (_key, v: unknown) => {
    if (typeof v === "string") {
      if (!v.includes(NUL)) return v;
      changed = true;
      return v.replaceAll(NUL, NUL_ESCAPE);
    }
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      // Keys too: rebuild the object only when one of them holds a NUL.
      const keys = Object.keys(v);
      if (!keys.some((k) => k.includes(NUL))) return v;
      changed = true;
      // No prototype: a "__proto__" key stays a plain key.
      const out: Record<string, unknown> = Object.create(null);
      for (const k of keys) out[k.replaceAll(NUL, NUL_ESCAPE)] = (v as Record<string, unknown>)[k];
      return out;
    }
    return v;
  }) as unknown;
  return changed ? escaped : undefined;
}
