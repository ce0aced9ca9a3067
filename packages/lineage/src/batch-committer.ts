import { backoffDelayMs, type LineageCounters, type Logger } from "@factflow/protocols";
import { COPY_ROWS_TARGET, copyRowsBinary } from "./copy-binary.js";
import {
  asUpsert,
  insertRowsStatement,
  insertSanitisedRowStatement,
  type PendingRow,
  type PendingUpdate,
  plainInsertRowsStatement,
  type Statement,
  updateRowsStatement,
  updateSanitisedRowStatement,
} from "./lineage-sql.js";
import { sanitiseRow, sanitiseUpdate } from "./nul-escape.js";
import type { LineageSqlRunner } from "./sql-runner.js";

/** Retry policy of one {@link BatchCommitter}. */
export interface CommitPolicy {
  readonly attempts: number;
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  readonly attemptTimeoutMs: number;
}

/** The writer's counters the committer adds to (shared by both of the writer's lanes). */
export type WriteCounters = Omit<LineageCounters, "queued">;

/**
 * Commits one batch of lineage rows and updates through one runner: retried with backoff on a
 * fresh pool, split row by row when the database rejects the data, counted lost when nothing helps.
 * It never throws.
 */
export class BatchCommitter {
  readonly #runner: LineageSqlRunner;
  readonly #log: Logger;
  readonly #policy: CommitPolicy;
  readonly #counters: WriteCounters;

  constructor(runner: LineageSqlRunner, log: Logger, policy: CommitPolicy, counters: WriteCounters) {
    this.#runner = runner;
    this.#log = log;
    this.#policy = policy;
    this.#counters = counters;
  }

  /** Resolves once the batch is committed or counted lost; true when nothing of it was lost. */
  async write(inserts: PendingRow[], updates: PendingUpdate[]): Promise<boolean> {
    const size = inserts.length + updates.length;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#execute(inserts, updates);
        this.#counters.written += size;
        return true;
      } catch (error) {
        if (isDataError(error)) {
          // One bad row must not cost the whole batch: write them one by one.
          return this.#isolate(inserts, updates, error);
        }
        this.#runner.reset();
        if (attempt >= this.#policy.attempts) {
          this.#counters.lost += size;
          this.#log.error("lineage batch lost after retries", {
            rows: inserts.length,
            updates: updates.length,
            attempts: attempt,
            error: errorText(error),
            lost: this.#counters.lost,
          });
          return false;
        }
        this.#counters.retriedWrites += size;
        const delay = backoffDelayMs(
          { initialDelayMs: this.#policy.retryDelayMs, maxDelayMs: this.#policy.maxRetryDelayMs },
          attempt,
        );
        this.#log.warn("lineage write failed; retrying", {
          attempt,
          delayMs: delay,
          rows: size,
          error: errorText(error),
        });
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  async #execute(inserts: PendingRow[], updates: PendingUpdate[]): Promise<void> {
    // Inserts and updates touch disjoint rows (an update of a row still queued was merged into it),
    // and both are idempotent (a COPY meeting a stored id falls back to the upsert), so they can go
    // out side by side without a transaction.
    const work: Promise<void>[] = [];
    if (inserts.length > 0) work.push(this.#insert(inserts));
    if (updates.length > 0) {
      const s = updateRowsStatement(updates);
      work.push(this.#runner.execute(s.text, s.params));
    }
    await this.#withinTimeout(work);
  }

  /** Waits for `work`, or fails once the attempt's time is up. */
  async #withinTimeout(work: Promise<void>[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`lineage commit did not finish within ${this.#policy.attemptTimeoutMs} ms`)),
        this.#policy.attemptTimeoutMs,
      );
    });
    try {
      await Promise.race([Promise.all(work), timeout]);
    } finally {
      clearTimeout(timer);
      // A timed-out statement may still settle later; its outcome no longer matters (and a late
      // insert cannot regress a row: see the upsert's guard in lineage-sql.ts).
      for (const w of work) w.catch(() => {});
    }
  }

  /**
   * New rows go out as a plain binary COPY where the runner can (PostgreSQL, PGlite); a batch holding
   * an id that is already stored (a retried batch whose first attempt did commit, or a row recorded
   * twice) fails as a whole with unique_violation and is sent again as the upsert, which is
   * idempotent. So does a batch with a value the binary encoding does not take (a timestamp
   * `Date.parse` cannot read, say): the upsert sends it as text and the database judges it.
   */
  async #insert(rows: PendingRow[]): Promise<void> {
    const runner = this.#runner;
    const data = runner.copy === undefined ? undefined : encodeOrUndefined(rows);
    if (runner.copy !== undefined && data !== undefined) {
      if (await insertedUnlessStored(runner.copy(COPY_ROWS_TARGET, data))) return;
    } else if (runner.copy === undefined) {
      // A runner without COPY (the pending lane's small commits): the plain INSERT first, which
      // costs the database less per row than the upsert; a stored id sends the upsert after it,
      // with the same parameters.
      const plain = plainInsertRowsStatement(rows);
      if (await insertedUnlessStored(runner.execute(plain.text, plain.params))) return;
      const upsert = asUpsert(plain);
      await runner.execute(upsert.text, upsert.params);
      return;
    }
    const s = insertRowsStatement(rows);
    await runner.execute(s.text, s.params);
  }

  async #isolate(inserts: PendingRow[], updates: PendingUpdate[], cause: unknown): Promise<boolean> {
    this.#log.warn("lineage batch rejected by the database; writing its rows one by one", {
      error: errorText(cause),
    });
    let whole = true;
    const queue: ([PendingRow] | [undefined, PendingUpdate])[] = [
      ...inserts.map((row) => [row] as [PendingRow]),
      ...updates.map((up) => [undefined, up] as [undefined, PendingUpdate]),
    ];
    for (let i = 0; i < queue.length; i++) {
      const [row, up] = queue[i] as [PendingRow | undefined, PendingUpdate | undefined];
      try {
        try {
          await this.#execute(row === undefined ? [] : [row], up === undefined ? [] : [up]);
        } catch (error) {
          if (!isDataError(error)) throw error;
          // Refused with adapter rows folded in: the write goes again without them, and each of
          // them as a row of its own, so what is refused (or stored escaped) is the row that holds
          // the bad value, with its own `sanitised` list. Tried whole first: an update may have
          // committed beside the insert that failed, and adding its folded rows again is a no-op.
          const folded = row?.invocations ?? up?.invocations ?? null;
          if (folded !== null) {
            queue.push(
              row === undefined
                ? [undefined, { ...(up as PendingUpdate), invocations: null }]
                : [{ ...row, invocations: null }],
              ...folded.map((r) => [r] as [PendingRow]),
            );
            continue;
          }
          // A NUL character, which text and jsonb cannot hold: stored escaped rather than lost.
          if (!(await this.#writeSanitised(row, up))) throw error;
        }
        this.#counters.written++;
      } catch (error) {
        whole = false;
        this.#counters.lost++;
        this.#log.error("lineage write rejected; lost", {
          id: row?.id ?? up?.id,
          error: errorText(error),
          lost: this.#counters.lost,
        });
      }
    }
    return whole;
  }

  /**
   * Writes a refused row (or update) again with its NUL characters escaped and the columns that held
   * one recorded in `sanitised`. False when it holds no NUL (it was refused for another reason).
   */
  async #writeSanitised(row: PendingRow | undefined, update: PendingUpdate | undefined): Promise<boolean> {
    let statement: Statement | undefined;
    let columns: readonly string[] = [];
    if (row !== undefined) {
      const sanitised = sanitiseRow(row);
      if (sanitised !== undefined) {
        statement = insertSanitisedRowStatement(sanitised.value, sanitised.columns);
        columns = sanitised.columns;
      }
    } else if (update !== undefined) {
      const sanitised = sanitiseUpdate(update);
      if (sanitised !== undefined) {
        statement = updateSanitisedRowStatement(sanitised.value, sanitised.columns);
        columns = sanitised.columns;
      }
    }
    if (statement === undefined) return false;
    await this.#withinTimeout([this.#runner.execute(statement.text, statement.params)]);
    this.#log.warn(
      "lineage write held NUL characters, which the database cannot store; stored them escaped",
      {
        id: row?.id ?? update?.id,
        columns,
      },
    );
    return true;
  }
}

const UNIQUE_VIOLATION = "23505";

/** True once `insert` committed; false when it failed because an id was already stored (then upsert). */
async function insertedUnlessStored(insert: Promise<void>): Promise<boolean> {
  try {
    await insert;
    return true;
  } catch (error) {
    if ((error as { code?: unknown } | null)?.code !== UNIQUE_VIOLATION) throw error;
    return false;
  }
}

/** The batch as a binary COPY stream, or undefined when a value does not fit its column's binary form. */
function encodeOrUndefined(rows: readonly PendingRow[]): Uint8Array | undefined {
  try {
    return copyRowsBinary(rows);
  } catch (error) {
    if (error instanceof TypeError) return undefined;
    throw error;
  }
}

/** SQLSTATE classes 22 (data) and 23 (constraints): retrying the same batch cannot succeed. */
function isDataError(error: unknown): boolean {
  // A TypeError comes from serialising the batch (e.g. a BigInt smuggled into a payload).
  if (error instanceof TypeError) return true;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^(22|23)[0-9A-Z]{3}$/.test(code);
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
