import { mkdir } from "node:fs/promises";
import { resolve } from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { FactflowError } from "@factflow/protocols";
import { Kysely, PGliteDialect, sql } from "kysely";
import { PostgresJSDialect } from "kysely-postgres-js";
import postgres from "postgres";
import { describeConnectError, withConnectionErrors } from "./connection-errors.js";
import { reconnectDelaySeconds } from "./reconnect-delay.js";
import { redactUrl } from "./redact-url.js";
import type { LineageDatabaseSchema } from "./schema.js";
import { createPgliteSqlRunner, createPostgresSqlRunner, type LineageSqlRunner } from "./sql-runner.js";

/** The two Kysely handles behind one lineage database. */
export interface DatabaseHandles {
  readonly dialect: "postgres" | "pglite";
  /** Configs and executions. */
  readonly db: Kysely<LineageDatabaseSchema>;
  /** Lineage queries: a separate pool, so lineage never queues behind the store. */
  readonly lineageDb: Kysely<LineageDatabaseSchema>;
  /** The lineage writer's own channel. */
  readonly writer: LineageSqlRunner;
  /** Where the data lives, safe to print. */
  readonly location: string;
  close(): Promise<void>;
}

/** Options for {@link connectPostgres}. */
export interface PostgresConnectOptions {
  /** @default 10 */
  readonly poolSize?: number;
  /** @default 4 */
  readonly lineagePoolSize?: number;
  /** Seconds to wait for a connection. @default 10 */
  readonly connectTimeoutSeconds?: number;
  /** `application_name` of the lineage connections (lets operators and tests find them). @default "factflow-lineage" */
  readonly lineageApplicationName?: string;
  /** Connections of the lineage writer. @default 2 */
  readonly writerPoolSize?: number;
}

/** Opens two postgres.js pools on `url` and checks that the server answers. */
export async function connectPostgres(
  url: string,
  options: PostgresConnectOptions = {},
): Promise<DatabaseHandles> {
  const shown = redactUrl(url);
  const common = {
    connect_timeout: options.connectTimeoutSeconds ?? 10,
    backoff: reconnectDelaySeconds,
    onnotice: () => {},
    // Not `fetch_types: false` here: postgres.js 3.4.9 then hangs when the first use of a pool is
    // `reserve()`, which is how kysely-postgres-js takes connections.
  };
  let storeSql: postgres.Sql;
  let lineageSql: postgres.Sql;
  try {
    storeSql = postgres(url, {
      ...common,
      max: options.poolSize ?? 10,
      connection: { application_name: "factflow" },
    });
    lineageSql = postgres(url, {
      ...common,
      max: options.lineagePoolSize ?? 4,
      connection: { application_name: options.lineageApplicationName ?? "factflow-lineage" },
    });
  } catch (error) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] the database URL ${shown} cannot be parsed. Use postgres://user:password@host:5432/database.`,
      { cause: error },
    );
  }
  // Both pools take connections with postgres.js `reserve()`; a connection that dies there used to
  // crash the process in postgres.js 3.4.9, which patches/postgres@3.4.9.patch fixes. What remains
  // is a rejected call, reported as a retryable FactflowError naming the redacted URL.
  const db = new Kysely<LineageDatabaseSchema>({
    dialect: withConnectionErrors(new PostgresJSDialect({ postgres: storeSql }), shown),
  });
  const lineageDb = new Kysely<LineageDatabaseSchema>({
    dialect: withConnectionErrors(new PostgresJSDialect({ postgres: lineageSql }), shown),
  });
  try {
    await sql`select 1`.execute(db);
  } catch (error) {
    await Promise.allSettled([storeSql.end({ timeout: 0 }), lineageSql.end({ timeout: 0 })]);
    const raw = error instanceof FactflowError && error.cause !== undefined ? error.cause : error;
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] cannot connect to PostgreSQL at ${shown}: ${describeConnectError(raw)}. ` +
        "Start the server or fix DATABASE_URL (postgres://user:password@host:5432/database); " +
        "leave DATABASE_URL unset to use the embedded PGlite database under the data directory instead.",
      { cause: raw, retryable: true },
    );
  }
  const lineageApp = options.lineageApplicationName ?? "factflow-lineage";
  const writer = createPostgresSqlRunner(url, {
    max: options.writerPoolSize ?? 2,
    applicationName: `${lineageApp}-writer`,
    connectTimeoutSeconds: common.connect_timeout,
  });
  return {
    dialect: "postgres",
    db,
    lineageDb,
    writer,
    location: shown,
    async close() {
      await Promise.allSettled([db.destroy(), lineageDb.destroy(), writer.close()]);
    },
  };
}

/** PGlite directories open in this process: a second instance on the same files would corrupt them. */
const openPgliteDirs = new Set<string>();

/** Opens (creating if needed) the embedded PGlite database in `<dataDir>/pglite`. */
export async function connectPglite(dataDir: string): Promise<DatabaseHandles> {
  const dir = resolve(dataDir, "pglite");
  if (openPgliteDirs.has(dir)) {
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] the embedded PGlite database in ${dir} is already open in this process. ` +
        "Share the LineageDatabase returned by the first openLineageDatabase call, or close it first.",
    );
  }
  openPgliteDirs.add(dir);
  let pglite: PGlite;
  try {
    await mkdir(dir, { recursive: true });
    pglite = await PGlite.create(dir);
  } catch (error) {
    openPgliteDirs.delete(dir);
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] cannot open the embedded PGlite database in ${dir}: ${describeConnectError(error)}. ` +
        "Check that the directory is writable and not used by another Factflow process, or set DATABASE_URL.",
      { cause: error },
    );
  }
  // One PGlite instance serves both handles (it is single-connection); the lineage writer still
  // keeps its own queue. Kysely must not close the shared instance: close() does it once.
  const db = new Kysely<LineageDatabaseSchema>({ dialect: new PGliteDialect({ pglite }) });
  const lineageDb = new Kysely<LineageDatabaseSchema>({ dialect: new PGliteDialect({ pglite }) });
  return {
    dialect: "pglite",
    db,
    lineageDb,
    writer: createPgliteSqlRunner(pglite),
    location: dir,
    async close() {
      try {
        if (!pglite.closed) await pglite.close();
      } finally {
        openPgliteDirs.delete(dir);
      }
    },
  };
}
