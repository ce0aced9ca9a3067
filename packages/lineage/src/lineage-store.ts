import type {
  LineageCounters,
  LineagePageQuery,
  LineageProtocol,
  LineageRow,
  LineageUpdate,
  Logger,
  RecordedInput,
  RouteStatusCount,
} from "@factflow/protocols";
import { OPEN_LINEAGE_STATUSES } from "@factflow/protocols";
import { type Kysely, sql } from "kysely";
import { assertUuid, pageOf } from "./ids.js";
import { fromStoredRow, type StoredLineageRow } from "./lineage-rows.js";
import { LineageWriter, type LineageWriterOptions } from "./lineage-writer.js";
import { queryMessageStatus } from "./message-status-query.js";
import {
  checkMessageId,
  checkRow,
  invalid,
  LINEAGE_KINDS as KINDS,
  LINEAGE_STATUSES as STATUSES,
} from "./row-checks.js";
import type { LineageDatabaseSchema } from "./schema.js";
import type { LineageSqlRunner } from "./sql-runner.js";

/**
 * `LineageProtocol` over a Kysely handle of its own: writes go through the group-commit
 * {@link LineageWriter}, queries read the lineage table directly.
 */
export class LineageStore implements LineageProtocol {
  readonly #db: Kysely<LineageDatabaseSchema>;
  readonly #writer: LineageWriter;
  readonly #onClose: (() => Promise<void>) | undefined;

  /** `onClose` runs after the writer has flushed and stopped (the owner releases connections there). */
  constructor(
    db: Kysely<LineageDatabaseSchema>,
    writer: LineageSqlRunner,
    logger: Logger,
    options: LineageWriterOptions = {},
    onClose?: () => Promise<void>,
  ) {
    this.#db = db;
    this.#onClose = onClose;
    this.#writer = new LineageWriter(writer, logger, options);
  }

  record(row: LineageRow): void {
    checkRow(row);
    this.#writer.record(row);
  }

  update(id: string, update: LineageUpdate): void {
    assertUuid(id, "lineage row id");
    if (!STATUSES.has(update.status)) invalid(`lineage status ${JSON.stringify(update.status)} is unknown`);
    this.#writer.update(id, update);
  }

  async registerPending(rows: readonly LineageRow[]): Promise<void> {
    for (const row of rows) checkRow(row);
    await this.#writer.registerPending(rows);
  }

  flush(): Promise<void> {
    return this.#writer.flush();
  }

  roomFor(limit: number): Promise<void> | undefined {
    return this.#writer.roomFor(limit);
  }

  async countOpen(executionId: string): Promise<number> {
    assertUuid(executionId, "execution id");
    // The completion gate must see every write made before it asked. Open rows the writer still
    // holds back are counted in memory, before the flush: a held row is either still held or queued
    // by then, and the flush writes what is queued (a row released meanwhile counts twice, which only
    // delays the verdict to the next check; none is missed).
    const held = this.#writer.heldOpen(executionId);
    await this.#writer.flushQueued();
    const result = await this.#db
      .selectFrom("lineage")
      .select(sql<number>`count(*)::int`.as("n"))
      .where("execution_id", "=", executionId)
      .where("status", "in", [...OPEN_LINEAGE_STATUSES])
      .executeTakeFirstOrThrow();
    return held + result.n;
  }

  counters(): LineageCounters {
    return this.#writer.counters();
  }

  async rows(executionId: string, query: LineagePageQuery = {}) {
    assertUuid(executionId, "execution id");
    const { offset, limit } = pageOf(query);
    if (query.kind !== undefined && !KINDS.has(query.kind))
      invalid(`lineage kind ${JSON.stringify(query.kind)} is unknown`);
    if (query.status !== undefined && !STATUSES.has(query.status)) {
      invalid(`lineage status ${JSON.stringify(query.status)} is unknown`);
    }
    let base = this.#db.selectFrom("lineage").where("execution_id", "=", executionId);
    if (query.status !== undefined) base = base.where("status", "=", query.status);
    if (query.route !== undefined) base = base.where("route", "=", query.route);
    if (query.kind !== undefined) base = base.where("kind", "=", query.kind);
    const [count, items] = await Promise.all([
      base.select(sql<number>`count(*)::int`.as("n")).executeTakeFirstOrThrow(),
      base.selectAll().orderBy("started_at").orderBy("id").offset(offset).limit(limit).execute(),
    ]);
    return { total: count.n, items: items.map((r) => fromStoredRow(r as StoredLineageRow)) };
  }

  async countsByRoute(executionId: string): Promise<readonly RouteStatusCount[]> {
    assertUuid(executionId, "execution id");
    const rows = await this.#db
      .selectFrom("lineage")
      .select(["route", "kind", "status", sql<number>`count(*)::int`.as("count")])
      .where("execution_id", "=", executionId)
      .groupBy(["route", "kind", "status"])
      .orderBy("route")
      .orderBy("kind")
      .orderBy("status")
      .execute();
    return rows.map(
      (r) => ({ route: r.route, kind: r.kind, status: r.status, count: r.count }) as RouteStatusCount,
    );
  }

  async tree(executionId: string, messageId: string): Promise<readonly LineageRow[]> {
    assertUuid(executionId, "execution id");
    checkMessageId(messageId);
    // Up: from each row reached, its parent, and the message rows of its message. A message row's
    // parent is an adapter row of the message it came from, whose chain of parents ends at that
    // message's first adapter row (no parent): only the message row leads further up, so the walk
    // goes through it to the root. Down: every row whose parent is in the tree, and every row of a
    // message already in it (adapter rows of a child message may hang off its message row or off
    // nothing at all). UNION (not ALL) stops at rows already seen. Each step is two index lookups in
    // a lateral subquery, not one join on an OR: PGlite planned the OR as a scan per row (an
    // execution of 100,000 rows took minutes; this takes about a second).
    const result = await sql<StoredLineageRow>`
      with recursive
      up (id, parent_id, message_id) as (
        select id, parent_id, message_id from lineage where execution_id = ${executionId} and message_id = ${messageId}
        union
        select n.id, n.parent_id, n.message_id from up cross join lateral (
          select l.id, l.parent_id, l.message_id from lineage l where l.id = up.parent_id
          union all
          select m.id, m.parent_id, m.message_id from lineage m
            where m.execution_id = ${executionId} and m.message_id = up.message_id and m.kind = 'message'
        ) n
      ),
      down (id, message_id) as (
        select id, message_id from lineage where execution_id = ${executionId} and message_id = ${messageId}
        union
        select n.id, n.message_id from down cross join lateral (
          select c.id, c.message_id from lineage c where c.parent_id = down.id and c.kind = 'message'
          union all
          select s.id, s.message_id from lineage s
            where s.execution_id = ${executionId} and s.message_id = down.message_id
        ) n
      ),
      ids (id) as (
        select id from down
        union
        select id from lineage where execution_id = ${executionId} and message_id in (select message_id from up)
      )
      select lineage.* from lineage join ids on lineage.id = ids.id
      order by lineage.started_at, lineage.id`.execute(this.#db);
    return result.rows.map(fromStoredRow);
  }

  async routeInputs(
    executionId: string,
    route: string,
    messageIds?: readonly string[],
  ): Promise<readonly RecordedInput[]> {
    assertUuid(executionId, "execution id");
    if (messageIds !== undefined && messageIds.length === 0) return [];
    for (const id of messageIds ?? []) checkMessageId(id);
    let query = this.#db
      .selectFrom("lineage")
      .select(["message_id", "correlation_id", "payload", "started_at"])
      .distinctOn("message_id")
      .where("execution_id", "=", executionId)
      .where("route", "=", route)
      .where("kind", "=", "message");
    if (messageIds !== undefined) query = query.where("message_id", "in", [...messageIds]);
    // One input per message (a redelivered message may have several rows): its first recording.
    const rows = await query.orderBy("message_id").orderBy("started_at").execute();
    return rows
      .sort(
        (a, b) =>
          +new Date(a.started_at) - +new Date(b.started_at) || a.message_id.localeCompare(b.message_id),
      )
      .map((r) => ({
        messageId: r.message_id,
        correlationId: r.correlation_id,
        payload: (r.payload ?? null) as RecordedInput["payload"],
      }));
  }

  messageStatus(executionId: string, messageId: string) {
    return queryMessageStatus(this.#db, executionId, messageId);
  }

  /** Flushes and stops the writer; later `record`/`update` calls throw `lineage_error`. */
  async close(): Promise<void> {
    await this.#writer.close();
    await this.#onClose?.();
  }
}
