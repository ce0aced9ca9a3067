import type {
  ExecutionListQuery,
  ExecutionReadOptions,
  ExecutionRecord,
  ExecutionStatus,
  ExecutionStoreProtocol,
  JsonValue,
  NewExecution,
  PipelineConfig,
  StoredConfig,
} from "@factflow/protocols";
import { EXECUTION_STATUS_ORDER, FactflowError } from "@factflow/protocols";
import { type Kysely, type Selectable, sql } from "kysely";
import { notifyCluster } from "./cluster-notify-sql.js";
import { ClusterStore } from "./cluster-store.js";
import { checkListQuery } from "./execution-list-query.js";
import { assertUuid } from "./ids.js";
import { iso } from "./lineage-rows.js";
import {
  DatabaseQueueDefinitionStore,
  type DatabaseQueueDefinitionStoreOptions,
} from "./queue-definition-store.js";
import type { LineageDatabaseSchema, PipelineConfigsTable, PipelineExecutionsTable } from "./schema.js";

const EXECUTION_STATUSES = new Set(["running", "completed", "failed", "cancelled"]);
/** The rank of a status in `EXECUTION_STATUS_ORDER`, for sorting by status. */
const STATUS_RANK = sql.raw(
  `array_position(array[${EXECUTION_STATUS_ORDER.map((s) => `'${s}'`).join(",")}]::text[], status)`,
);
/** Advisory lock key serialising capped execution creates ("factflow" in ASCII, as a number). */
const RUNNING_CAP_LOCK = 0x666163746600;

/** `ExecutionStoreProtocol` over its own Kysely handle (never the lineage writer's). */
export class ExecutionStore implements ExecutionStoreProtocol {
  readonly #db: Kysely<LineageDatabaseSchema>;

  readonly #onClose: (() => Promise<void>) | undefined;
  /** Cluster-wide cap on running executions (see `limitRunning`). */
  #maxRunning: number | undefined;
  /** Where creates and ends are announced (`NOTIFY`), or undefined (PGlite: one process only). */
  readonly #channel: string | undefined;

  /**
   * `onClose` lets the owner of the connections release them when this store is closed. With
   * `notifyChannel`, each create and end of an execution, and each change of the leases and owners
   * through `cluster()`, sends a `NOTIFY` on that channel in the transaction of the change.
   */
  constructor(
    db: Kysely<LineageDatabaseSchema>,
    onClose?: () => Promise<void>,
    options: { readonly notifyChannel?: string } = {},
  ) {
    this.#db = db;
    this.#onClose = onClose;
    this.#channel = options.notifyChannel;
  }

  /**
   * Caps the executions running at once across every server on this database: `createExecution`
   * refuses (`too_many_executions`) once `max` rows are `running`. The count and the insert run
   * under one transaction-scoped advisory lock, so concurrent creates on several servers cannot
   * overshoot. `undefined` lifts the cap.
   */
  limitRunning(max: number | undefined): void {
    this.#maxRunning = max;
  }

  /** Leases and ownership for several servers on this database (docs/deployment.md). */
  cluster(): ClusterStore {
    return new ClusterStore(this.#db, this.#channel === undefined ? {} : { notifyChannel: this.#channel });
  }

  /** Named queue definitions shared by every server on this database (docs/deployment.md). */
  queueDefinitions(options?: DatabaseQueueDefinitionStoreOptions): DatabaseQueueDefinitionStore {
    return new DatabaseQueueDefinitionStore(this.#db, options);
  }

  async saveConfig(name: string, source: string, parsed: PipelineConfig): Promise<StoredConfig> {
    checkName(name);
    // Two servers saving the same name at once race for the next version; the primary key makes
    // the loser fail, and it simply tries the following number.
    for (let tries = 0; ; tries++) {
      try {
        const row = await this.#db
          .insertInto("pipeline_configs")
          .columns(["name", "version", "source", "parsed"])
          .expression((eb) =>
            eb
              .selectFrom("pipeline_configs")
              .select([
                sql<string>`${name}::text`.as("name"),
                sql<number>`coalesce(max(version), 0) + 1`.as("version"),
                sql<string>`${source}::text`.as("source"),
                sql`${JSON.stringify(parsed)}::text::jsonb`.as("parsed"),
              ])
              .where("name", "=", name),
          )
          .returningAll()
          .executeTakeFirstOrThrow();
        return toStoredConfig(row);
      } catch (error) {
        if ((error as { code?: unknown }).code !== "23505" || tries >= 5) throw error;
      }
    }
  }

  async getConfig(name: string, version?: number): Promise<StoredConfig | undefined> {
    checkName(name);
    if (version !== undefined && (!Number.isInteger(version) || version < 1)) {
      throw new FactflowError(
        "invalid_argument",
        `[factflow/lineage] config version ${version} must be an integer ≥ 1.`,
      );
    }
    let query = this.#db.selectFrom("pipeline_configs").selectAll().where("name", "=", name);
    query =
      version === undefined
        ? query.orderBy("version", "desc").limit(1)
        : query.where("version", "=", version);
    const row = await query.executeTakeFirst();
    return row === undefined ? undefined : toStoredConfig(row);
  }

  async listConfigs(): Promise<readonly StoredConfig[]> {
    const rows = await this.#db
      .selectFrom("pipeline_configs")
      .selectAll()
      .distinctOn("name")
      .orderBy("name")
      .orderBy("version", "desc")
      .execute();
    return rows.map(toStoredConfig);
  }

  async createExecution(execution: NewExecution): Promise<ExecutionRecord> {
    assertUuid(execution.id, "execution id");
    if (execution.parentExecutionId !== undefined)
      assertUuid(execution.parentExecutionId, "parent execution id");
    const max = this.#maxRunning;
    const channel = this.#channel;
    if (max === undefined && channel === undefined) return this.#insertExecution(this.#db, execution);
    return this.#db.transaction().execute(async (trx) => {
      if (max === undefined) {
        const record = await this.#insertExecution(trx, execution);
        await notifyCluster(trx, channel, `created ${record.id}`);
        return record;
      }
      await sql`select pg_advisory_xact_lock(${String(RUNNING_CAP_LOCK)}::bigint)`.execute(trx);
      const { n } = await trx
        .selectFrom("pipeline_executions")
        .select(sql<number>`count(*)::int`.as("n"))
        .where("status", "=", "running")
        .executeTakeFirstOrThrow();
      if (n >= max) {
        throw new FactflowError(
          "too_many_executions",
          `[factflow/lineage] ${n} executions are already running on this database's servers (cluster-wide cap ${max}); wait for one to finish or raise FACTFLOW_CLUSTER_MAX_RUNNING`,
          { retryable: true },
        );
      }
      const record = await this.#insertExecution(trx, execution);
      await notifyCluster(trx, channel, `created ${record.id}`);
      return record;
    });
  }

  async #insertExecution(
    db: Kysely<LineageDatabaseSchema>,
    execution: NewExecution,
  ): Promise<ExecutionRecord> {
    const row = await db
      .insertInto("pipeline_executions")
      .values({
        id: execution.id,
        config_name: execution.configName,
        config_version: execution.configVersion,
        status: "running",
        config_snapshot: jsonb(execution.configSnapshot),
        input: null,
        input_text:
          execution.input === null ? null : (execution.inputText ?? JSON.stringify(execution.input)),
        error: null,
        parent_execution_id: execution.parentExecutionId ?? null,
        replay_from_route: execution.replayFromRoute ?? null,
        counters: jsonb({}),
        owner_node: execution.ownerNode ?? null,
      })
      // Not the input back: a large one (a fan-out's items) would be rendered as text by the
      // database, carried back and parsed into a second copy that the running execution holds.
      .returning(COLUMNS_BUT_INPUT)
      .executeTakeFirstOrThrow();
    return { ...toExecution({ ...row, input: null, input_text: null }), input: execution.input };
  }

  async getExecution(id: string, options: ExecutionReadOptions = {}): Promise<ExecutionRecord | undefined> {
    assertUuid(id, "execution id");
    const base = this.#db.selectFrom("pipeline_executions").where("id", "=", id);
    const row = await (options.includeInput === false
      ? base.select(COLUMNS_WITHOUT_INPUT)
      : base.selectAll()
    ).executeTakeFirst();
    return row === undefined ? undefined : toExecution(row);
  }

  async listExecutions(query: ExecutionListQuery = {}) {
    const q = checkListQuery(query);
    let base = this.#db.selectFrom("pipeline_executions");
    if (query.status !== undefined) base = base.where("status", "=", query.status);
    if (query.configName !== undefined) base = base.where("config_name", "=", query.configName);
    if (query.parentExecutionId !== undefined)
      base = base.where("parent_execution_id", "=", query.parentExecutionId);
    if (q.from !== undefined) base = base.where("created_at", ">=", q.from);
    if (q.to !== undefined) base = base.where("created_at", "<", q.to);
    const way = q.descending ? "desc" : "asc";
    let rows = (
      query.includeInput === false ? base.select(COLUMNS_WITHOUT_INPUT) : base.selectAll()
    ).$narrowType<Selectable<PipelineExecutionsTable>>();
    if (q.sort === "duration") rows = rows.orderBy(sql`coalesce(finished_at, now()) - created_at`, way);
    if (q.sort === "status") rows = rows.orderBy(sql`${STATUS_RANK}`, way);
    // Ties (and the started order itself) by start, newest first unless started ascending: the
    // (created_at desc, id desc) index serves both directions of the plain list.
    const startWay = q.sort === "started" ? way : "desc";
    const [count, page] = await Promise.all([
      base.select(sql<number>`count(*)::int`.as("n")).executeTakeFirstOrThrow(),
      rows.orderBy("created_at", startWay).orderBy("id", startWay).offset(q.offset).limit(q.limit).execute(),
    ]);
    return { total: count.n, items: page.map(toExecution) };
  }

  async finishExecution(
    id: string,
    status: Exclude<ExecutionStatus, "running">,
    details: { error?: string; counters?: Record<string, number> } = {},
  ): Promise<boolean> {
    assertUuid(id, "execution id");
    if (status === ("running" as string) || !EXECUTION_STATUSES.has(status)) {
      throw new FactflowError(
        "invalid_argument",
        `[factflow/lineage] an execution cannot finish as ${JSON.stringify(status)} (completed | failed | cancelled).`,
      );
    }
    const finish = async (db: Kysely<LineageDatabaseSchema>): Promise<boolean> => {
      const result = await db
        .updateTable("pipeline_executions")
        .set({
          status,
          finished_at: sql<Date>`now()`,
          ...(details.error === undefined ? {} : { error: details.error }),
          ...(details.counters === undefined ? {} : { counters: jsonb(details.counters) }),
        })
        .where("id", "=", id)
        .where("status", "=", "running")
        .executeTakeFirst();
      const finished = Number(result.numUpdatedRows) === 1;
      if (finished) await notifyCluster(db, this.#channel, `${status} ${id}`);
      return finished;
    };
    // The notification commits with the status: a server woken by it reads the row ended.
    return this.#channel === undefined ? finish(this.#db) : this.#db.transaction().execute(finish);
  }

  async deleteExecutionsBefore(before: Date): Promise<number> {
    if (!(before instanceof Date) || Number.isNaN(before.getTime())) {
      throw new FactflowError(
        "invalid_argument",
        "[factflow/lineage] deleteExecutionsBefore needs a valid Date.",
      );
    }
    return this.#db.transaction().execute(async (trx) => {
      const doomed = trx
        .selectFrom("pipeline_executions")
        .select("id")
        .where("finished_at", "is not", null)
        .where("finished_at", "<", before);
      await trx.deleteFrom("lineage").where("execution_id", "in", doomed).execute();
      const result = await trx
        .deleteFrom("pipeline_executions")
        .where("finished_at", "is not", null)
        .where("finished_at", "<", before)
        .executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }

  async close(): Promise<void> {
    await this.#onClose?.();
  }
}

function jsonb(value: unknown) {
  return sql<string>`${JSON.stringify(value)}::text::jsonb`;
}

function checkName(name: string): void {
  if (typeof name !== "string" || name.length === 0 || name.length > 120) {
    throw new FactflowError(
      "invalid_argument",
      "[factflow/lineage] config name must be a non-empty string of at most 120 characters.",
    );
  }
}

function toStoredConfig(row: Selectable<PipelineConfigsTable>): StoredConfig {
  return {
    name: row.name,
    version: row.version,
    source: row.source,
    parsed: row.parsed as PipelineConfig,
    createdAt: iso(row.created_at),
  };
}

const COLUMNS_BUT_INPUT = [
  "id",
  "config_name",
  "config_version",
  "status",
  "config_snapshot",
  "error",
  "parent_execution_id",
  "replay_from_route",
  "created_at",
  "finished_at",
  "counters",
  "owner_node",
] as const;

/** Every column, the input's two as null: a read that leaves a possibly large input in the database. */
const COLUMNS_WITHOUT_INPUT = [
  ...COLUMNS_BUT_INPUT,
  sql<null>`null`.as("input"),
  sql<null>`null`.as("input_text"),
] as const;

function toExecution(row: Selectable<PipelineExecutionsTable>): ExecutionRecord {
  return {
    id: row.id,
    configName: row.config_name,
    configVersion: row.config_version,
    status: row.status as ExecutionStatus,
    configSnapshot: row.config_snapshot as PipelineConfig,
    input: (row.input_text === null ? (row.input ?? null) : JSON.parse(row.input_text)) as JsonValue | null,
    error: row.error,
    parentExecutionId: row.parent_execution_id,
    replayFromRoute: row.replay_from_route,
    createdAt: iso(row.created_at),
    finishedAt: row.finished_at === null ? null : iso(row.finished_at),
    counters: (row.counters ?? {}) as Record<string, number>,
  };
}
