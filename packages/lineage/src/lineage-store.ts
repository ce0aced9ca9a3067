import type {
  LineageCounters,
  LineagePageQuery,
  LineageProtocol,
  LineageRow,
  LineageTree,
  LineageTreeQuery,
  LineageUpdate,
  Logger,
  RecordedInput,
  RouteStatusCount,
} from "@factflow/protocols";
import { OPEN_LINEAGE_STATUSES } from "@factflow/protocols";

const OPEN_STATUSES: ReadonlySet<string> = new Set(OPEN_LINEAGE_STATUSES);

import { type Kysely, sql } from "kysely";
import { assertUuid, pageOf } from "./ids.js";
import { fromStoredRow, type StoredLineageRow } from "./lineage-rows.js";
import { arrayLiteral } from "./lineage-sql.js";
import { LineageWriter, type LineageWriterOptions } from "./lineage-writer.js";
import { queryMessageStatus } from "./message-status-query.js";
import {
  checkMessageId,
  checkRow,
  invalid,
  LINEAGE_KINDS as KINDS,
  LINEAGE_STATUSES as STATUSES,
  treeLimitOf,
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

  flushSettled(): Promise<void> {
    return this.#writer.flushQueued();
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
    // The table, not lineage_rows: a folded adapter row is always settled (docs/lineage.md), so
    // only rows of their own can be open, and lineage_open_idx holds them all.
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
    // Folded adapter rows are settled adapter rows: a page of message rows or of open rows reads the
    // table alone (lineage_open_idx serves no union).
    const tableOnly =
      query.kind === "message" || (query.status !== undefined && OPEN_STATUSES.has(query.status));
    let base = this.#db
      .selectFrom(tableOnly ? "lineage" : "lineage_rows")
      .where("execution_id", "=", executionId);
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
      .selectFrom("lineage_rows")
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

  async tree(executionId: string, messageId: string, query?: LineageTreeQuery): Promise<LineageTree> {
    assertUuid(executionId, "execution id");
    checkMessageId(messageId);
    const limit = treeLimitOf(query);
    // Up, from message to message: a message row's parent is an adapter row of the message it came
    // from, which `parent_message_id` names (rows written before migration 0006 have none: their
    // parent row is found by id; the last resort, a parent adapter row folded into its message row
    // with no `parent_message_id` beside it, looks among the execution's folded rows). Every row of
    // every message reached (this one's included) is in the tree, whatever the limit: a chain of
    // ancestors is short. Each step is index lookups in a lateral subquery, not a join on an OR:
    // PGlite planned the OR as a scan per row.
    const up = await sql<StoredLineageRow>`
      with recursive
      up (message_id) as (
        select ${messageId}::text
        union
        select p.message_id from up cross join lateral (
          select coalesce(
            m.parent_message_id,
            (select a.message_id from lineage a where a.id = m.parent_id),
            (select f.message_id from lineage f
              where f.execution_id = ${executionId} and f.invocations is not null
                and f.invocations @> jsonb_build_array(jsonb_build_object('id', m.parent_id::text))
              limit 1)
          ) as message_id
          from lineage m
          where m.execution_id = ${executionId} and m.message_id = up.message_id and m.kind = 'message'
            and (m.parent_id is not null or m.parent_message_id is not null)
        ) p where p.message_id is not null
      )
      select l.* from up cross join lateral (
        select * from lineage_rows where execution_id = ${executionId} and message_id = up.message_id
      ) l`.execute(this.#db);
    if (up.rows.length === 0) return { items: [], truncated: false };
    const tree = new Map(up.rows.map((r) => [r.id, r]));
    const messages = new Set(up.rows.map((r) => r.message_id));
    // Down, one level per round: the child message rows of the rows reached last (only a message
    // row's parent leads to another message), then every row of those messages. Both lookups stop
    // once they have one row more than the room left, so the root of a large execution costs about
    // `limit` index probes, not one per row of the execution; the extra row says the tree goes on.
    let level = up.rows.filter((r) => r.message_id === messageId).map((r) => r.id);
    while (level.length > 0) {
      const room = Math.max(0, limit - tree.size);
      const children = await sql<{ message_id: string }>`
        select c.message_id from unnest(${arrayLiteral(level)}::uuid[]) as p(id) cross join lateral (
          select message_id from lineage where parent_id = p.id and kind = 'message' limit ${room + 1}
        ) c limit ${room + 1}`.execute(this.#db);
      const next = [...new Set(children.rows.map((r) => r.message_id))].filter((m) => !messages.has(m));
      if (next.length === 0) break;
      if (room === 0) return { items: ordered(tree), truncated: true };
      const rows = await sql<StoredLineageRow>`
        select l.* from unnest(${arrayLiteral(next)}::text[]) as m(id) cross join lateral (
          select * from lineage_rows where execution_id = ${executionId} and message_id = m.id limit ${room + 1}
        ) l limit ${room + 1}`.execute(this.#db);
      for (const m of next) messages.add(m);
      level = [];
      for (const r of rows.rows) {
        if (tree.has(r.id)) continue;
        if (tree.size >= limit) return { items: ordered(tree), truncated: true };
        tree.set(r.id, r);
        level.push(r.id);
      }
      // More child message rows than there was room for: the messages of the ones not read are
      // left out (each of those rows is a row of the tree).
      if (children.rows.length > room) return { items: ordered(tree), truncated: true };
    }
    return { items: ordered(tree), truncated: false };
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

/** The rows of a tree in database order (start time, then id) as the protocol shows them. */
function ordered(tree: ReadonlyMap<string, StoredLineageRow>): LineageRow[] {
  return [...tree.values()]
    .map(fromStoredRow)
    .sort(
      (a, b) => Date.parse(a.startedAt) - Date.parse(b.startedAt) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
    );
}
