import { type Kysely, sql } from "kysely";
import type { Migration, MigrationProvider } from "kysely/migration";

/**
 * Migrations ship in code (not as files) so a bundled build carries them and both dialects run the
 * very same statements. Never edit a released migration: add a new one.
 */
const migrations: Record<string, Migration> = {
  "0001_initial": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("pipeline_configs")
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("version", "integer", (c) => c.notNull())
        .addColumn("source", "text", (c) => c.notNull())
        .addColumn("parsed", "jsonb", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .addPrimaryKeyConstraint("pipeline_configs_pk", ["name", "version"])
        .execute();

      await db.schema
        .createTable("pipeline_executions")
        .addColumn("id", "uuid", (c) => c.primaryKey())
        .addColumn("config_name", "text", (c) => c.notNull())
        .addColumn("config_version", "integer")
        .addColumn("status", "text", (c) =>
          c.notNull().check(sql`status in ('running', 'completed', 'failed', 'cancelled')`),
        )
        .addColumn("config_snapshot", "jsonb", (c) => c.notNull())
        .addColumn("input", "jsonb")
        .addColumn("error", "text")
        .addColumn("parent_execution_id", "uuid")
        .addColumn("replay_from_route", "text")
        .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn("finished_at", "timestamptz")
        .addColumn("counters", "jsonb", (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
        .execute();
      await db.schema
        .createIndex("pipeline_executions_created_idx")
        .on("pipeline_executions")
        .columns(["created_at desc", "id desc"])
        .execute();
      await db.schema
        .createIndex("pipeline_executions_status_idx")
        .on("pipeline_executions")
        .columns(["status", "created_at desc"])
        .execute();
      await db.schema
        .createIndex("pipeline_executions_config_idx")
        .on("pipeline_executions")
        .columns(["config_name", "created_at desc"])
        .execute();
      await db.schema
        .createIndex("pipeline_executions_parent_idx")
        .on("pipeline_executions")
        .column("parent_execution_id")
        .where(sql.ref("parent_execution_id"), "is not", null)
        .execute();
      await db.schema
        .createIndex("pipeline_executions_finished_idx")
        .on("pipeline_executions")
        .column("finished_at")
        .where(sql.ref("finished_at"), "is not", null)
        .execute();

      // No foreign key to pipeline_executions: lineage is written on its own connection and must
      // never fail because of ordering with the execution store; retention deletes both explicitly.
      await db.schema
        .createTable("lineage")
        .addColumn("id", "uuid", (c) => c.primaryKey())
        .addColumn("execution_id", "uuid", (c) => c.notNull())
        .addColumn("kind", "text", (c) => c.notNull())
        .addColumn("route", "text", (c) => c.notNull())
        .addColumn("adapter", "text")
        .addColumn("adapter_index", "integer")
        .addColumn("message_id", "text", (c) => c.notNull())
        .addColumn("correlation_id", "text", (c) => c.notNull())
        .addColumn("parent_id", "uuid")
        .addColumn("attempt", "integer", (c) => c.notNull())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("input_hash", "text")
        .addColumn("payload", "jsonb")
        .addColumn("output_keys", "jsonb")
        .addColumn("error", "jsonb")
        .addColumn("started_at", "timestamptz", (c) => c.notNull())
        .addColumn("finished_at", "timestamptz")
        .execute();
      // The completion gate polls this: it only ever holds the few open rows, so it stays tiny
      // however many millions of closed rows the table has.
      await sql`create index lineage_open_idx on lineage (execution_id)
        where status in ('pending', 'initiated', 'processing')`.execute(db);
      // Per-execution listing, counts per route/status, route inputs, retention.
      await db.schema
        .createIndex("lineage_execution_route_idx")
        .on("lineage")
        .columns(["execution_id", "route", "status"])
        .execute();
      // "Tree of one message": the rows of a message, and the children of a row.
      await db.schema
        .createIndex("lineage_message_idx")
        .on("lineage")
        .columns(["execution_id", "message_id"])
        .execute();
      await sql`create index lineage_parent_idx on lineage (parent_id) where parent_id is not null`.execute(
        db,
      );
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable("lineage").ifExists().execute();
      await db.schema.dropTable("pipeline_executions").ifExists().execute();
      await db.schema.dropTable("pipeline_configs").ifExists().execute();
    },
  },
  // Several servers on one PostgreSQL (docs/deployment.md): each holds a lease on its row in
  // factflow_nodes, renewed by a heartbeat; an execution names the server that owns it.
  "0002_cluster_nodes": {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable("pipeline_executions").addColumn("owner_node", "text").execute();
      await db.schema
        .createTable("factflow_nodes")
        .addColumn("node_id", "text", (c) => c.primaryKey())
        .addColumn("started_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn("heartbeat_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .addColumn("lease_expires_at", "timestamptz", (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable("factflow_nodes").ifExists().execute();
      await db.schema.alterTable("pipeline_executions").dropColumn("owner_node").execute();
    },
  },
  // Named queue definitions (PUT /api/v1/queues/{name}/definition) shared by every server on this
  // database; `revision` grows with each change, so a server sees which ones it has not applied yet.
  "0003_queue_definitions": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("factflow_queue_definitions")
        .addColumn("name", "text", (c) => c.primaryKey())
        .addColumn("definition", "jsonb", (c) => c.notNull())
        .addColumn("revision", "integer", (c) => c.notNull())
        .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.dropTable("factflow_queue_definitions").ifExists().execute();
    },
  },
  // Fewer index entries per lineage row: PostgreSQL spends about 7 µs of CPU per hop on each
  // secondary index (docs/performance.md, "Lineage writes"). The (execution_id, route, status) index
  // served only per-execution reads, which the (execution_id, message_id) index also starts with.
  // Only a message row's parent leads to another message (an adapter row's parent is a row of its
  // own message, which the message index finds), so the tree walk needs parent_id of message rows.
  "0004_lean_lineage_indexes": {
    async up(db: Kysely<unknown>) {
      await sql`drop index if exists lineage_execution_route_idx`.execute(db);
      await sql`drop index if exists lineage_parent_idx`.execute(db);
      await sql`create index lineage_child_message_idx on lineage (parent_id)
        where kind = 'message' and parent_id is not null`.execute(db);
    },
    async down(db: Kysely<unknown>) {
      await sql`drop index if exists lineage_child_message_idx`.execute(db);
      await sql`create index lineage_parent_idx on lineage (parent_id) where parent_id is not null`.execute(
        db,
      );
      await db.schema
        .createIndex("lineage_execution_route_idx")
        .on("lineage")
        .columns(["execution_id", "route", "status"])
        .execute();
    },
  },
  // A row the database refused because of a NUL character (U+0000, which text and jsonb cannot
  // hold) is stored with each NUL escaped; this lists the columns where that happened (null: none).
  "0005_lineage_sanitised": {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable("lineage").addColumn("sanitised", "jsonb").execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable("lineage").dropColumn("sanitised").execute();
    },
  },
  // A hop's settled adapter rows travel inside its message row (`invocations`, an array of objects
  // with an adapter row's own columns) instead of as rows of their own: one written row per hop.
  // `lineage_rows` reads them back as rows, so every query sees the same rows in either layout;
  // rows written before keep `invocations` null. `parent_message_id` takes the tree's walk up from a
  // message row to the message it came from without finding its parent adapter row by id (a folded
  // row has no index entry of its own).
  "0006_folded_invocations": {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable("lineage").addColumn("parent_message_id", "text").execute();
      await db.schema.alterTable("lineage").addColumn("invocations", "jsonb").execute();
      // The folded rows of both, one per id: of two with the same id, the one of `added` when it is
      // at least as far along by (attempt, status rank), as the upsert decides for a row of its own;
      // so a batch sent again (its first attempt did commit) changes nothing. Stored rows keep their
      // order, new ones follow in theirs.
      await sql`create or replace function factflow_merge_invocations(stored jsonb, added jsonb)
        returns jsonb language sql immutable as $$
          select case
            when added is null then stored
            when stored is null then added
            else (
              select jsonb_agg(
                case when a.value is not null and (s.value is null
                  or ((a.value->>'attempt')::integer, case a.value->>'status' when 'pending' then 0
                      when 'initiated' then 1 when 'processing' then 2 else 3 end)
                    >= ((s.value->>'attempt')::integer, case s.value->>'status' when 'pending' then 0
                      when 'initiated' then 1 when 'processing' then 2 else 3 end))
                then a.value else s.value end
                order by coalesce(s.ordinality, a.ordinality + 1000000000))
              from jsonb_array_elements(stored) with ordinality as s(value, ordinality)
              full join jsonb_array_elements(added) with ordinality as a(value, ordinality)
                on s.value->>'id' = a.value->>'id'
            )
          end
        $$`.execute(db);
      await sql`create view lineage_rows as
        select id, execution_id, kind, route, adapter, adapter_index, message_id, correlation_id,
          parent_id, attempt, status, input_hash, payload, output_keys, error, started_at, finished_at,
          sanitised
        from lineage
        union all
        select (i.value->>'id')::uuid, l.execution_id, 'adapter'::text, l.route, i.value->>'adapter',
          (i.value->>'adapter_index')::integer, l.message_id, l.correlation_id,
          (i.value->>'parent_id')::uuid, (i.value->>'attempt')::integer, i.value->>'status',
          i.value->>'input_hash', null::jsonb, i.value->'output_keys', i.value->'error',
          (i.value->>'started_at')::timestamptz, (i.value->>'finished_at')::timestamptz, null::jsonb
        from lineage l cross join lateral jsonb_array_elements(l.invocations) as i(value)
        where l.invocations is not null`.execute(db);
    },
    async down(db: Kysely<unknown>) {
      await sql`drop view if exists lineage_rows`.execute(db);
      await sql`drop function if exists factflow_merge_invocations(jsonb, jsonb)`.execute(db);
      await db.schema.alterTable("lineage").dropColumn("invocations").execute();
      await db.schema.alterTable("lineage").dropColumn("parent_message_id").execute();
    },
  },
  // An execution's input is stored as JSON text, not jsonb. Nothing queries inside it, and parsing a
  // large one (a fan-out's items) into jsonb took the database far more memory than the text: in
  // PGlite, whose WebAssembly memory never shrinks, 300 000 items of 5 MB grew the process by about
  // 200 MB as jsonb against about 50 MB as text. Executions created before keep their `input`.
  "0007_input_text": {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable("pipeline_executions").addColumn("input_text", "text").execute();
    },
    async down(db: Kysely<unknown>) {
      await db.schema.alterTable("pipeline_executions").dropColumn("input_text").execute();
    },
  },
};

/** The package's migrations, in order. */
export const lineageMigrationProvider: MigrationProvider = {
  async getMigrations() {
    return migrations;
  },
};

/** Kysely bookkeeping tables, named so they do not clash with an application's own migrations. */
export const MIGRATION_TABLE = "factflow_migration";
export const MIGRATION_LOCK_TABLE = "factflow_migration_lock";
