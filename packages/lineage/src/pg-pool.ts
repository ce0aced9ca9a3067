import { Client, type ClientConfig, Pool } from "pg";

/** Options of {@link createPgPool}. */
export interface PgPoolOptions {
  readonly max: number;
  readonly applicationName: string;
  /** Seconds a new connection may take to be ready. */
  readonly connectTimeoutSeconds: number;
}

/** Seconds of silence on a socket before TCP keepalive starts probing it. */
const KEEPALIVE_SECONDS = 60;

const ignore = () => {};

/**
 * A node-postgres pool on `url` that never crashes the process and never makes a caller wait for a
 * connection that is gone.
 *
 * - node-postgres emits `error` on a client whose connection dies (a terminated backend, a server
 *   restart, a network cut). The pool listens while a client is idle (and re-emits it on the pool);
 *   while a client is checked out nobody does, and an `error` event without a listener is an uncaught
 *   exception. Every client gets a listener of its own from birth, and the pool one too. The event
 *   carries nothing to act on: the query in flight (if any) has already been rejected with the same
 *   error, the client is no longer queryable, and the pool drops it when it is released.
 * - There is no reconnect loop to tune: a dead client leaves the pool, and the next call opens a new
 *   connection at once, bounded by the connect timeout.
 * - The connect timeout is set on the clients, not on the pool: on the pool it would also bound the
 *   wait for a free connection, failing calls that merely queue behind others on a busy server.
 * - Idle connections stay open (no idle timeout), and TCP keepalive finds idle ones whose
 *   peer vanished without a word.
 */
export function createPgPool(url: string, options: PgPoolOptions): Pool {
  const connectionTimeoutMillis = Math.max(1, Math.round(options.connectTimeoutSeconds * 1000));
  class FactflowPgClient extends Client {
    constructor(config?: ClientConfig) {
      // The pool keeps a password given as an option non-enumerable: copy it explicitly.
      super({ ...config, password: config?.password, connectionTimeoutMillis });
      this.on("error", ignore);
    }
  }
  const pool = new Pool({
    connectionString: url,
    max: options.max,
    application_name: options.applicationName,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_SECONDS * 1000,
    idleTimeoutMillis: 0,
    Client: FactflowPgClient,
  });
  pool.on("error", ignore);
  return pool;
}
