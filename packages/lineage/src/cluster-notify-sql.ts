import { type Kysely, sql } from "kysely";
import type { LineageDatabaseSchema } from "./schema.js";

/**
 * Sends `payload` on `channel` with `pg_notify` inside the caller's transaction: PostgreSQL delivers
 * it when that transaction commits, and never when it rolls back. Nothing when `channel` is undefined.
 */
export async function notifyCluster(
  db: Kysely<LineageDatabaseSchema>,
  channel: string | undefined,
  payload: string,
): Promise<void> {
  if (channel === undefined) return;
  await sql`select pg_notify(${channel}, ${payload})`.execute(db);
}
