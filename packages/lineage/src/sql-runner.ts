import type { PGlite } from "@electric-sql/pglite";
import postgres from "postgres";
import { reconnectDelaySeconds } from "./reconnect-delay.js";

/**
 * The narrow channel the lineage writer commits through. It bypasses Kysely on purpose: the writer
 * sends a handful of fixed statements, and it must be able to throw away a broken pool.
 */
export interface LineageSqlRunner {
  /** Runs one statement. */
  execute(text: string, params: readonly unknown[]): Promise<void>;
  /**
   * Runs a `COPY … FROM '/dev/blob'` statement fed with `data`. Optional: a runner without it gets
   * every batch as a multi-row upsert instead.
   */
  copy?(text: string, data: string): Promise<void>;
  /**
   * A second channel on a connection of its own, for the writer's pending lane (small commits a
   * caller awaits before publishing), so they never queue behind a bulk batch on the same socket.
   * Optional: without it the pending lane shares this runner. Closed by this runner's `close`.
   */
  pendingLane?(): LineageSqlRunner;
  /** Drops every pooled connection after a failure that may have left one unusable. */
  reset(): void;
  close(): Promise<void>;
}

/** Options of {@link createPostgresSqlRunner}. */
export interface PostgresSqlRunnerOptions {
  /** @default 2 */
  readonly max?: number;
  /** @default "factflow-lineage-writer" */
  readonly applicationName?: string;
  /** Seconds. @default 10 */
  readonly connectTimeoutSeconds?: number;
}

/** A writer channel with its own postgres.js pool. */
export function createPostgresSqlRunner(
  url: string,
  options: PostgresSqlRunnerOptions = {},
): LineageSqlRunner {
  const make = () =>
    postgres(url, {
      max: options.max ?? 2,
      connect_timeout: options.connectTimeoutSeconds ?? 10,
      backoff: reconnectDelaySeconds,
      onnotice: () => {},
      // No array parameters are ever sent; skipping the type fetch also avoids an unhandled rejection
      // in postgres.js when a connection is killed while that fetch runs.
      fetch_types: false,
      connection: { application_name: options.applicationName ?? "factflow-lineage-writer" },
    });
  let sql = make();
  let lane: LineageSqlRunner | undefined;
  return {
    pendingLane() {
      // Two connections: the writer keeps up to two pending-lane commits in flight.
      lane ??= createPostgresSqlRunner(url, {
        ...options,
        max: 2,
        applicationName: `${options.applicationName ?? "factflow-lineage-writer"}-pending`,
      });
      return lane;
    },
    async execute(text, params) {
      // Prepared: the writer sends only a handful of fixed statement texts, so each connection
      // parses each once. Unprepared, postgres.js describes every parameterised statement first and
      // waits for the answer before binding it: two round trips per commit instead of one.
      await sql.unsafe(text, params as never[], { prepare: true });
    },
    reset() {
      // postgres.js 3.4.9 can leave a connection whose socket died mid-write unable to send again
      // (porsager/postgres#1208): a fresh pool is the only reliable way out.
      const old = sql;
      sql = make();
      old.end({ timeout: 0 }).catch(() => {});
    },
    async close() {
      await Promise.all([sql.end({ timeout: 5 }), lane?.close()]);
    },
  };
}

/** A writer channel on a shared PGlite instance (whose owner closes it). */
export function createPgliteSqlRunner(pglite: PGlite): LineageSqlRunner {
  return {
    async execute(text, params) {
      await pglite.query(text, [...params]);
    },
    async copy(text, data) {
      await pglite.query(text, [], { blob: new Blob([data]) });
    },
    reset() {},
    async close() {},
  };
}
