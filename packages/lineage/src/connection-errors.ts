import { FactflowError, isFactflowError } from "@factflow/protocols";
import type { DatabaseConnection, Dialect, Driver } from "kysely";

/**
 * Error codes that mean the database connection is gone or unreachable, not that the statement was
 * wrong: Node socket errors, the SQLSTATEs of a server shutting down, and the two codes
 * {@link codeOf} gives node-postgres's own errors.
 */
const CONNECTION_LOSS_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECT_TIMEOUT",
  "ECONNRESET",
  "ECONNREFUSED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "57P01", // admin_shutdown (pg_terminate_backend, fast shutdown)
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up or shutting down)
]);

/**
 * node-postgres reports a lost or unopenable connection with a plain `Error` and no `code`; these
 * are its messages (pg 8.x), each given a code here. A server's own errors always carry a SQLSTATE.
 */
const PG_CLIENT_MESSAGES: ReadonlyMap<string, string> = new Map([
  ["Connection terminated unexpectedly", "CONNECTION_CLOSED"],
  ["Connection terminated", "CONNECTION_CLOSED"],
  ["Client has encountered a connection error and is not queryable", "CONNECTION_CLOSED"],
  ["Client was closed and is not queryable", "CONNECTION_CLOSED"],
  ["timeout expired", "CONNECT_TIMEOUT"],
  ["Connection terminated due to connection timeout", "CONNECT_TIMEOUT"],
  ["timeout exceeded when trying to connect", "CONNECT_TIMEOUT"],
]);

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string") return code;
  return error instanceof Error ? PG_CLIENT_MESSAGES.get(error.message) : undefined;
}

/** True when `error` says the connection to PostgreSQL was lost or could not be made. */
export function isConnectionLoss(error: unknown): boolean {
  const code = codeOf(error);
  // SQLSTATE class 08 is "connection exception".
  return code !== undefined && (CONNECTION_LOSS_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code));
}

/** A short, password-free reason for a failed connection attempt. */
export function describeConnectError(error: unknown): string {
  if (error instanceof Error) {
    const code = codeOf(error);
    if (code === "ECONNREFUSED") return "connection refused (nothing listens on that host and port)";
    if (code === "ENOTFOUND") return "host not found";
    if (code === "28P01" || code === "28000") return "authentication failed";
    if (code === "3D000") return "the database does not exist";
    if (code === "CONNECT_TIMEOUT") return "timed out while connecting";
    if (code === "CONNECTION_CLOSED" || code === "ECONNRESET") return "the server closed the connection";
    if (code === "57P01" || code === "57P02") return "the server ended the session (shutdown or terminated)";
    if (code === "57P03") return "the server is starting up or shutting down";
    return code === undefined ? error.message : `${code} ${error.message}`;
  }
  return String(error);
}

/** Turns a lost connection into a retryable `FactflowError`; leaves every other error as it is. */
export function translateConnectionError(error: unknown, location: string): unknown {
  if (!isConnectionLoss(error)) return error;
  return new FactflowError(
    "lineage_error",
    `[factflow/lineage] lost the connection to PostgreSQL at ${location} (${describeConnectError(error)}). ` +
      "The call may not have completed: retry it once the database is reachable again " +
      "(check that the server is running and that DATABASE_URL points at it).",
    { cause: error, retryable: true },
  );
}

/**
 * True when `error` means the database cannot be reached right now, so the same call may succeed
 * later: a connection refused, reset or terminated (`pg_terminate_backend`, a server shutting
 * down), a connect timeout. That is a `lineage_error` this package raised for such a loss, or a raw
 * driver error of that kind. Statement errors (a constraint, a syntax error) are not: retrying
 * them fails the same way. Answer the first kind with "unavailable, retry later" (HTTP 503).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (isFactflowError(error)) return error.code === "lineage_error" && isConnectionLoss(error.cause);
  return isConnectionLoss(error);
}

/**
 * Wraps a Kysely dialect so that a connection lost while acquiring a connection or running a query
 * surfaces as a retryable `FactflowError` naming the (redacted) database location, instead of a raw
 * driver error. Statement errors (constraint violations, syntax) pass through unchanged.
 */
export function withConnectionErrors(dialect: Dialect, location: string): Dialect {
  return {
    createAdapter: () => dialect.createAdapter(),
    createIntrospector: (db) => dialect.createIntrospector(db),
    createQueryCompiler: () => dialect.createQueryCompiler(),
    createDriver: () => translateDriver(dialect.createDriver(), location),
  };
}

function translateDriver(driver: Driver, location: string): Driver {
  // The driver and its connections are patched in place rather than proxied: Kysely's PostgresDriver
  // keeps private state on both and identifies its connections on release. It also hands out the same
  // connection object every time it lends the same pooled client, so each is patched once.
  const patched = new WeakSet<DatabaseConnection>();
  const acquire = driver.acquireConnection.bind(driver);
  driver.acquireConnection = async (options) => {
    let connection: DatabaseConnection;
    try {
      connection = await acquire(options);
    } catch (error) {
      throw translateConnectionError(error, location);
    }
    if (patched.has(connection)) return connection;
    patched.add(connection);
    const execute = connection.executeQuery.bind(connection);
    connection.executeQuery = async (query, queryOptions) => {
      try {
        return await execute(query, queryOptions);
      } catch (error) {
        throw translateConnectionError(error, location);
      }
    };
    return connection;
  };
  return driver;
}
