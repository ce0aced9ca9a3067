import type { LineageStatus } from "@factflow/protocols";
import type { Kysely } from "kysely";
import { assertUuid } from "./ids.js";
import type { LineageDatabaseSchema } from "./schema.js";

/**
 * The committed `message` row of one message (`LineageProtocol.messageStatus`): one lookup on the
 * (execution_id, message_id) index, no flush, so it reads what every process has made durable. The
 * engine calls it only for broker-redelivered messages it has no memory of, so it stays off the
 * hot path. When several message rows share the id (older data), the furthest attempt wins.
 */
export async function queryMessageStatus(
  db: Kysely<LineageDatabaseSchema>,
  executionId: string,
  messageId: string,
): Promise<{ status: LineageStatus; attempt: number } | undefined> {
  assertUuid(executionId, "execution id");
  if (typeof messageId !== "string" || messageId.length === 0 || messageId.length > 512) return undefined;
  const row = await db
    .selectFrom("lineage")
    .select(["status", "attempt"])
    .where("execution_id", "=", executionId)
    .where("message_id", "=", messageId)
    .where("kind", "=", "message")
    .orderBy("attempt", "desc")
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? undefined : { status: row.status as LineageStatus, attempt: row.attempt };
}
