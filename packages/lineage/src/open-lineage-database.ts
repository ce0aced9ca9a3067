import type { ExecutionStoreProtocol, LineageProtocol, Logger } from "@factflow/protocols";
import { FactflowError, silentLogger } from "@factflow/protocols";
import { type MigrationResult, Migrator } from "kysely/migration";
import { CLUSTER_CHANNEL } from "./cluster-notifications.js";
import {
  connectPglite,
  connectPostgres,
  type DatabaseHandles,
  type PostgresConnectOptions,
} from "./connect.js";
import { ExecutionStore } from "./execution-store.js";
import { LineageStore } from "./lineage-store.js";
import type { LineageWriterOptions } from "./lineage-writer.js";
import { MemoryExecutionStore } from "./memory-execution-store.js";
import { MemoryLineageStore } from "./memory-lineage-store.js";
import { lineageMigrationProvider, MIGRATION_LOCK_TABLE, MIGRATION_TABLE } from "./migrations.js";

/** Where and how to open the lineage database. */
export interface LineageDatabaseOptions {
  /**
   * A `postgres://` URL. Without it (undefined or empty) the embedded PGlite database under `dataDir`
   * is used; `undefined` is accepted so `process.env.DATABASE_URL` can be passed as is.
   */
  readonly databaseUrl?: string | undefined;
  /** Data directory; PGlite lives in `<dataDir>/pglite`. @default ".factflow" */
  readonly dataDir?: string | undefined;
  /** @default silentLogger */
  readonly logger?: Logger | undefined;
  /** Group-commit tuning of the lineage writer. */
  readonly writer?: LineageWriterOptions;
  /** PostgreSQL pool settings (ignored for PGlite). */
  readonly postgres?: PostgresConnectOptions;
  /** Run the migrations on open. @default true */
  readonly migrate?: boolean;
  /**
   * Keep lineage, configs and executions in this process's memory instead of a database
   * (`lineage: memory`): same completion semantics, nothing persisted, gone when the process exits.
   * `databaseUrl` and `dataDir` are ignored. @default false
   */
  readonly memory?: boolean;
  /**
   * Run PGlite on a worker thread of its own, off the event loop that runs pipelines. Only for
   * diagnosis may it be false (PGlite then shares the main thread). @default true
   */
  readonly pgliteWorker?: boolean;
}

/** An open lineage database: the two protocols the engine and server use, plus lifecycle. */
export interface LineageDatabase {
  readonly lineage: LineageProtocol;
  readonly executions: ExecutionStoreProtocol;
  readonly dialect: "postgres" | "pglite" | "memory";
  /** The redacted URL, the PGlite directory, or `memory`. */
  readonly location: string;
  /** Applies pending migrations (done on open unless `migrate: false`). Returns the names applied. */
  migrate(): Promise<readonly string[]>;
  /** Flushes lineage, then closes every connection. Idempotent. */
  close(): Promise<void>;
}

/**
 * Opens the database behind lineage, configs and executions, and brings its schema up to date.
 * PostgreSQL when `databaseUrl` is given, otherwise embedded PGlite (a first open of a new
 * directory takes a few seconds while PGlite initialises it).
 */
export async function openLineageDatabase(options: LineageDatabaseOptions = {}): Promise<LineageDatabase> {
  if (options.memory === true) return openMemoryLineageDatabase();
  const logger = (options.logger ?? silentLogger).child({ component: "lineage" });
  const handles: DatabaseHandles =
    options.databaseUrl === undefined || options.databaseUrl === ""
      ? await connectPglite(options.dataDir ?? ".factflow", { worker: options.pgliteWorker !== false })
      : await connectPostgres(options.databaseUrl, options.postgres);

  const migrate = async (): Promise<readonly string[]> => {
    const migrator = new Migrator({
      db: handles.db,
      provider: lineageMigrationProvider,
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: MIGRATION_LOCK_TABLE,
    });
    const { error, results } = await migrator.migrateToLatest();
    if (error !== undefined) {
      const failed = results?.find((r: MigrationResult) => r.status === "Error")?.migrationName ?? "unknown";
      throw new FactflowError(
        "lineage_error",
        `[factflow/lineage] migration ${failed} failed on ${handles.location}: ${error instanceof Error ? error.message : String(error)}. ` +
          "Check that the user may create tables, and that the schema was not changed by hand.",
        { cause: error },
      );
    }
    return (results ?? []).map((r) => r.migrationName);
  };

  try {
    if (options.migrate !== false) {
      const applied = await migrate();
      if (applied.length > 0)
        logger.info("lineage migrations applied", { applied, dialect: handles.dialect });
    }
  } catch (error) {
    await handles.close();
    throw error;
  }

  // Connections close when the database is closed, or once both stores have been closed separately.
  let closingHandles: Promise<void> | undefined;
  const closeHandles = () => {
    closingHandles ??= handles.close();
    return closingHandles;
  };
  const stillOpen = new Set(["lineage", "executions"]);
  const released = (part: string) => async () => {
    stillOpen.delete(part);
    if (stillOpen.size === 0) await closeHandles();
  };
  const lineage = new LineageStore(
    handles.lineageDb,
    handles.writer,
    logger,
    options.writer,
    released("lineage"),
  );
  // Only PostgreSQL is shared by several processes: there the changes servers coordinate on are
  // announced on the cluster channel (see `ClusterNotifications`); PGlite has one process.
  const executions = new ExecutionStore(
    handles.db,
    released("executions"),
    handles.dialect === "postgres" ? { notifyChannel: CLUSTER_CHANNEL } : {},
  );
  let closing: Promise<void> | undefined;
  return {
    lineage,
    executions,
    dialect: handles.dialect,
    location: handles.location,
    migrate,
    close() {
      closing ??= (async () => {
        try {
          await lineage.close();
        } finally {
          await closeHandles();
        }
      })();
      return closing;
    },
  };
}

/**
 * Lineage, configs and executions in memory (see {@link LineageDatabaseOptions.memory}): nothing is
 * persisted, so a restart forgets every execution and `resume` has nothing to resume.
 */
export function openMemoryLineageDatabase(): LineageDatabase {
  const lineage = new MemoryLineageStore();
  const executions = new MemoryExecutionStore((ids) => lineage.forget(ids));
  return {
    lineage,
    executions,
    dialect: "memory",
    location: "memory",
    migrate: async () => [],
    async close() {
      await lineage.close();
    },
  };
}
