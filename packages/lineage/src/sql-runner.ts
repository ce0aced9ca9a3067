import { createHash } from "node:crypto";
import { finished } from "node:stream/promises";
import type { Client, Pool, PoolClient } from "pg";
import { from as copyFrom } from "pg-copy-streams";
import { createPgPool } from "./pg-pool.js";
import type { PgliteWorkerClient } from "./pglite-worker.js";

/**
 * The narrow channel the lineage writer commits through. It bypasses Kysely on purpose: the writer
 * sends a handful of fixed statements, and it must be able to throw away a broken pool.
 */
export interface LineageSqlRunner {
  /** Runs one statement. */
  execute(text: string, params: readonly unknown[]): Promise<void>;
  /**
   * Copies `data`, a PostgreSQL binary COPY stream (`FORMAT binary`), into `target` (`table (column,
   * …)`), in one statement: the runner names the source (`STDIN` on PostgreSQL, `'/dev/blob'` on
   * PGlite). Optional: a runner without it gets every batch as a multi-row upsert instead. The runner
   * owns `data` from then on (a worker-thread runner moves its memory away instead of copying it).
   */
  copy?(target: string, data: Uint8Array): Promise<void>;
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
  /**
   * Offer `copy`. A COPY takes two round trips (the server answers the statement before it takes
   * the data), the prepared upsert one: cheaper per row for large batches, slower for the small
   * commits a caller waits for. @default true
   */
  readonly copy?: boolean;
}

/** A writer channel with its own node-postgres pool. */
export function createPostgresSqlRunner(
  url: string,
  options: PostgresSqlRunnerOptions = {},
): LineageSqlRunner {
  const make = () =>
    createPgPool(url, {
      max: options.max ?? 2,
      applicationName: options.applicationName ?? "factflow-lineage-writer",
      connectTimeoutSeconds: options.connectTimeoutSeconds ?? 10,
    });
  let pool = make();
  // Clients lent out right now, per pool, so that `reset` can cut a statement that hangs.
  const lent = new Map<Pool, Set<PoolClient>>([[pool, new Set()]]);
  let lane: LineageSqlRunner | undefined;
  let closing: Promise<void> | undefined;
  const withClient = async (work: (client: PoolClient) => Promise<void>): Promise<void> => {
    const from = pool;
    const client = await from.connect();
    const inUse = lent.get(from);
    inUse?.add(client);
    try {
      await work(client);
    } finally {
      inUse?.delete(client);
      // A client whose connection failed is dropped by the pool on release, a sound one kept.
      client.release();
    }
  };
  const runner: LineageSqlRunner = {
    pendingLane() {
      // Two connections: the writer keeps up to two pending-lane commits in flight.
      // Small commits someone waits for: the one-round-trip upsert, not a COPY.
      lane ??= createPostgresSqlRunner(url, {
        ...options,
        copy: false,
        max: 2,
        applicationName: `${options.applicationName ?? "factflow-lineage-writer"}-pending`,
      });
      return lane;
    },
    async execute(text, params) {
      await withClient(async (client) => {
        // Named, so each connection parses each of the writer's few fixed statements once; without
        // parameters (maintenance statements) the simple protocol, which takes any statement.
        const name = params.length === 0 ? undefined : statementName(text);
        await client.query(
          name === undefined ? { text, values: [...params] } : { name, text, values: [...params] },
        );
      });
    },
    reset() {
      // After a failed or timed-out commit, start again on fresh connections: the old pool closes,
      // and a statement still hanging on one of its connections is cut off (its caller has given up).
      const old = pool;
      pool = make();
      lent.set(pool, new Set());
      const hanging = lent.get(old) ?? new Set();
      lent.delete(old);
      for (const client of hanging) (client as Client).end().catch(() => {});
      old.end().catch(() => {});
    },
    close() {
      closing ??= (async () => {
        const current = pool;
        // Waits for statements in flight, but not for ever: after 5 s they are cut off.
        const cut = setTimeout(() => {
          for (const client of lent.get(current) ?? []) (client as Client).end().catch(() => {});
        }, CLOSE_GRACE_MS);
        try {
          await Promise.all([current.end(), lane?.close()]);
        } finally {
          clearTimeout(cut);
        }
      })();
      return closing;
    },
  };
  if (options.copy !== false) {
    runner.copy = async (target, data) => {
      // pg-copy-streams speaks the COPY sub-protocol that node-postgres itself does not.
      await withClient(async (client) => {
        const stream = client.query(copyFrom(`copy ${target} from stdin with (format binary)`));
        stream.end(data);
        await finished(stream);
      });
    };
  }
  return runner;
}

const CLOSE_GRACE_MS = 5000;

/**
 * Statement names by text, the same on every connection. Only the first few distinct texts get one
 * (the writer sends three); any further text runs unnamed, so a runner used for ad-hoc statements
 * never makes its connections hold an ever-growing set of prepared statements.
 */
const statementNames = new Map<string, string>();
const MAX_NAMED_STATEMENTS = 32;

function statementName(text: string): string | undefined {
  let name = statementNames.get(text);
  if (name === undefined && statementNames.size < MAX_NAMED_STATEMENTS) {
    name = `factflow_${createHash("sha256").update(text).digest("hex").slice(0, 16)}`;
    statementNames.set(text, name);
  }
  return name;
}

/**
 * The part of a PGlite instance the writer uses. Structural, so this module (shared by the package's
 * main entry) never names `@electric-sql/pglite`, an optional peer dependency.
 */
export interface PgliteQueryable {
  query(text: string, params: unknown[], options?: { blob?: Blob }): Promise<unknown>;
}

/** A writer channel on a shared PGlite instance (whose owner closes it). */
export function createPgliteSqlRunner(pglite: PgliteQueryable): LineageSqlRunner {
  return {
    async execute(text, params) {
      await pglite.query(text, [...params]);
    },
    async copy(target, data) {
      await pglite.query(pgliteCopy(target), [], { blob: new Blob([data]) });
    },
    reset() {},
    async close() {},
  };
}

/** PGlite reads a COPY's data from its `/dev/blob` device, fed with the query's blob. */
function pgliteCopy(target: string): string {
  return `copy ${target} from '/dev/blob' with (format binary)`;
}

/** Commits of the writer between two `VACUUM lineage` on PGlite. */
const VACUUM_EVERY_COMMITS = 200;
/**
 * Statement data (text parameters and COPY streams) the writer sends between two rounds at most. The
 * log grows with what is written, not with the number of commits: a busy writer sends large batches,
 * and 200 of them would put far more than `max_wal_size` into the log before the next checkpoint.
 */
const VACUUM_EVERY_BYTES = 4 * 1024 * 1024;
/**
 * Vacuum rounds between two checkpoints. A checkpoint writes every dirty page, and the first change
 * of each page after it logs the whole page again: one per round costs about a fifth of the
 * worker's time in the relay. One every four rounds still keeps the log near 150
 * bytes per hop (`pnpm bench lineage-disk 20000 pglite`, docs/performance.md).
 */
const CHECKPOINT_EVERY_ROUNDS = 4;

/**
 * A writer channel on a PGlite running on a worker thread (whose owner closes it). PGlite runs
 * PostgreSQL in single-user mode, without the autovacuum daemon, so every updated lineage row would
 * leave its old version on disk for good, and nothing would checkpoint: every
 * {@link VACUUM_EVERY_COMMITS} commits, or {@link VACUUM_EVERY_BYTES} of data sent, whichever comes
 * first, this channel vacuums the table (on the worker thread), and every
 * {@link CHECKPOINT_EVERY_ROUNDS} such rounds it checkpoints, which lets old row versions' space
 * and old log segments be reused.
 */
export function createPgliteWorkerSqlRunner(client: PgliteWorkerClient): LineageSqlRunner {
  let commits = 0;
  let bytes = 0;
  let rounds = 0;
  const afterCommit = async (sent: number) => {
    bytes += sent;
    if (++commits % VACUUM_EVERY_COMMITS !== 0 && bytes < VACUUM_EVERY_BYTES) return;
    commits = 0;
    bytes = 0;
    // Housekeeping only: a failure is retried at the next round, never reported as lost lineage.
    // Single-user PostgreSQL has no checkpointer either: without one the write-ahead log grows
    // past `max_wal_size` until the database is closed.
    await client.exec("vacuum lineage").catch(() => {});
    if (++rounds % CHECKPOINT_EVERY_ROUNDS === 0) await client.exec("checkpoint").catch(() => {});
  };
  return {
    async execute(text, params) {
      await client.query(text, [...params]);
      let sent = 0;
      for (const p of params) if (typeof p === "string") sent += p.length;
      await afterCommit(sent);
    },
    async copy(target, data) {
      // Read before the copy: the client moves `data` to its worker, which leaves it empty here.
      const bytes = data.byteLength;
      await client.copy(pgliteCopy(target), data);
      await afterCommit(bytes);
    },
    reset() {},
    async close() {},
  };
}
