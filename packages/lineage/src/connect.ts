import { FactflowError } from "@factflow/protocols";
import { Kysely, PostgresDialect, sql } from "kysely";
import { describeConnectError, withConnectionErrors } from "./connection-errors.js";
import type { DatabaseHandles } from "./database-handles.js";
import { createPgPool } from "./pg-pool.js";
import { redactUrl } from "./redact-url.js";
import type { LineageDatabaseSchema } from "./schema.js";
import { createPostgresSqlRunner } from "./sql-runner.js";

export type { DatabaseHandles } from "./database-handles.js";

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
  /** Connections of the lineage writer's bulk lane (two batches in flight, each an insert and an update). @default 4 */
  readonly writerPoolSize?: number;
}

/** Opens two node-postgres pools on `url` (plus the writer's) and checks that the server answers. */
export async function connectPostgres(
  url: string,
  options: PostgresConnectOptions = {},
): Promise<DatabaseHandles> {
  const shown = redactUrl(url);
  if (!isPostgresUrl(url)) {
    throw new FactflowError(
      "invalid_argument",
      `[factflow/lineage] the database URL ${shown} cannot be parsed. Use postgres://user:password@host:5432/database.`,
    );
  }
  const connectTimeoutSeconds = options.connectTimeoutSeconds ?? 10;
  const lineageApp = options.lineageApplicationName ?? "factflow-lineage";
  const storePool = createPgPool(url, {
    max: options.poolSize ?? 10,
    applicationName: "factflow",
    connectTimeoutSeconds,
  });
  const lineagePool = createPgPool(url, {
    max: options.lineagePoolSize ?? 4,
    applicationName: lineageApp,
    connectTimeoutSeconds,
  });
  // A connection that dies under a call rejects that call; withConnectionErrors reports it as a
  // retryable FactflowError naming the redacted URL, and the pool replaces the connection.
  const db = new Kysely<LineageDatabaseSchema>({
    dialect: withConnectionErrors(new PostgresDialect({ pool: storePool }), shown),
  });
  const lineageDb = new Kysely<LineageDatabaseSchema>({
    dialect: withConnectionErrors(new PostgresDialect({ pool: lineagePool }), shown),
  });
  try {
    await sql`select 1`.execute(db);
  } catch (error) {
    await Promise.allSettled([db.destroy(), lineageDb.destroy()]);
    const raw = error instanceof FactflowError && error.cause !== undefined ? error.cause : error;
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] cannot connect to PostgreSQL at ${shown}: ${describeConnectError(raw)}. ` +
        "Start the server or fix DATABASE_URL (postgres://user:password@host:5432/database); " +
        "leave DATABASE_URL unset to use the embedded PGlite database under the data directory instead.",
      { cause: raw, retryable: true },
    );
  }
  const writer = createPostgresSqlRunner(url, {
    max: options.writerPoolSize ?? 4,
    applicationName: `${lineageApp}-writer`,
    connectTimeoutSeconds,
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

/** True for a `postgres://` or `postgresql://` URL that parses. */
function isPostgresUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === "postgres:" || protocol === "postgresql:";
  } catch {
    return false;
  }
}

/**
 * Opens the embedded PGlite database in `<dataDir>/pglite` (see `@factflow/lineage/pglite`). PGlite
 * is an optional peer dependency, loaded here on first use, so a PostgreSQL-only deployment need not
 * install it.
 */
export async function connectPglite(
  dataDir: string,
  options: { worker?: boolean } = {},
): Promise<DatabaseHandles> {
  const embedded = await import("./pglite.js");
  return embedded.connectPglite(dataDir, options);
}
