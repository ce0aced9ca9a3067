import type { LineageCounters, LineageRow, LineageUpdate, Logger } from "@factflow/protocols";
import { FactflowError } from "@factflow/protocols";
import {
  COPY_ROWS_SQL,
  copyRowsCsv,
  insertRowsStatement,
  type PendingRow,
  type PendingUpdate,
  toPendingRow,
  updateRowsStatement,
} from "./lineage-sql.js";
import type { LineageSqlRunner } from "./sql-runner.js";

/** Tuning of the group-commit writer. */
export interface LineageWriterOptions {
  /** How long the first write after an idle period waits for company before a commit. @default 5 */
  readonly intervalMs?: number;
  /** Rows (and, separately, updates) per commit. @default 2000 */
  readonly batchSize?: number;
  /**
   * Queued rows + updates beyond which new writes are refused and counted as `lost` (and logged).
   * Only reached when the database is down or far slower than the pipeline. @default 200000
   */
  readonly maxQueued?: number;
  /** Attempts per batch before its writes are counted lost. @default 6 */
  readonly attempts?: number;
  /** Delay before the first retry, doubled each time up to `maxRetryDelayMs`. @default 100 */
  readonly retryDelayMs?: number;
  /** @default 2000 */
  readonly maxRetryDelayMs?: number;
  /** A commit taking longer than this counts as failed (and the writer's pool is replaced). @default 30000 */
  readonly attemptTimeoutMs?: number;
}

/** A `flush` caller: resolved once the writes queued ahead of it have been taken and committed. */
interface Waiter {
  inserts: number;
  updates: number;
  resolve: () => void;
}

/**
 * Queues lineage writes in memory and group-commits them. A row recorded and then updated before
 * its batch leaves is written once; rows go out as one multi-row upsert and updates as one batched
 * UPDATE per commit. Batches are written one after another, so the changes to one row are applied
 * in the order they were made. Failures are retried with backoff, then counted as lost and logged;
 * they never reach the caller.
 */
export class LineageWriter {
  readonly #runner: LineageSqlRunner;
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #batchSize: number;
  readonly #maxQueued: number;
  readonly #attempts: number;
  readonly #retryDelayMs: number;
  readonly #maxRetryDelayMs: number;
  readonly #attemptTimeoutMs: number;

  #inserts = new Map<string, PendingRow>();
  #updates = new Map<string, PendingUpdate>();
  #waiters: Waiter[] = [];
  #inFlight = 0;
  #draining: Promise<void> | undefined;
  #batch: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;
  #closed = false;
  #overflowing = false;
  readonly #counters: Omit<LineageCounters, "queued"> = { written: 0, retriedWrites: 0, lost: 0 };

  constructor(runner: LineageSqlRunner, logger: Logger, options: LineageWriterOptions = {}) {
    this.#runner = runner;
    this.#log = logger;
    this.#intervalMs = options.intervalMs ?? 5;
    this.#batchSize = options.batchSize ?? 2000;
    this.#maxQueued = options.maxQueued ?? 200_000;
    this.#attempts = options.attempts ?? 6;
    this.#retryDelayMs = options.retryDelayMs ?? 100;
    this.#maxRetryDelayMs = options.maxRetryDelayMs ?? 2000;
    this.#attemptTimeoutMs = options.attemptTimeoutMs ?? 30_000;
  }

  record(row: LineageRow): void {
    if (!this.#admit(1)) return;
    // A record supersedes any change queued for the same id before it.
    this.#updates.delete(row.id);
    this.#inserts.set(row.id, toPendingRow(row));
    this.#schedule();
  }

  update(id: string, change: LineageUpdate): void {
    const queuedRow = this.#inserts.get(id);
    if (queuedRow !== undefined) {
      // Not yet sent: fold the change into the row, so pending→completed costs one write.
      queuedRow.status = change.status;
      if (change.outputKeys !== undefined) queuedRow.output_keys = change.outputKeys;
      if (change.error !== undefined) queuedRow.error = change.error;
      if (change.finishedAt !== undefined) queuedRow.finished_at = change.finishedAt;
      if (change.attempt !== undefined) queuedRow.attempt = change.attempt;
      return;
    }
    const queued = this.#updates.get(id);
    if (queued !== undefined) {
      queued.status = change.status;
      if (change.outputKeys !== undefined) queued.output_keys = change.outputKeys;
      if (change.error !== undefined) queued.error = change.error;
      if (change.finishedAt !== undefined) queued.finished_at = change.finishedAt;
      if (change.attempt !== undefined) queued.attempt = change.attempt;
      return;
    }
    if (!this.#admit(1)) return;
    this.#updates.set(id, {
      id,
      status: change.status,
      output_keys: change.outputKeys ?? null,
      error: change.error ?? null,
      finished_at: change.finishedAt ?? null,
      attempt: change.attempt ?? null,
    });
    this.#schedule();
  }

  /** Resolves once every write queued before the call has been committed (or counted lost). */
  flush(): Promise<void> {
    if (this.#inserts.size + this.#updates.size === 0) return this.#batch ?? Promise.resolve();
    // Batches take from the front of the queue, so what is queued now is done once this many
    // rows and updates have been taken and their batch committed (or counted lost).
    const done = new Promise<void>((resolve) =>
      this.#waiters.push({ inserts: this.#inserts.size, updates: this.#updates.size, resolve }),
    );
    this.#startNow();
    return done;
  }

  counters(): LineageCounters {
    return { ...this.#counters, queued: this.#inserts.size + this.#updates.size + this.#inFlight };
  }

  /** Flushes, then refuses further writes. */
  async close(): Promise<void> {
    await this.flush();
    this.#closed = true;
  }

  #admit(count: number): boolean {
    if (this.#closed) {
      throw new FactflowError(
        "lineage_error",
        "[factflow/lineage] the lineage writer is closed; open a new database.",
      );
    }
    const queued = this.#inserts.size + this.#updates.size + this.#inFlight;
    if (queued + count <= this.#maxQueued) {
      this.#overflowing = false;
      return true;
    }
    this.#counters.lost += count;
    if (!this.#overflowing) {
      this.#overflowing = true;
      this.#log.error("lineage queue full: dropping lineage writes until it drains (counted in lost)", {
        queued,
        maxQueued: this.#maxQueued,
        lost: this.#counters.lost,
      });
    }
    return false;
  }

  #schedule(): void {
    if (this.#draining !== undefined || this.#timer !== undefined) return;
    if (this.#inserts.size + this.#updates.size >= this.#batchSize) {
      this.#startNow();
      return;
    }
    this.#timer = setTimeout(() => this.#startNow(), this.#intervalMs);
  }

  #startNow(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#draining !== undefined) return;
    this.#draining = this.#drain().finally(() => {
      this.#draining = undefined;
      // Writes that arrived during the last commit start their own interval.
      if (this.#inserts.size + this.#updates.size > 0) this.#schedule();
    });
  }

  async #drain(): Promise<void> {
    // While a commit is in flight new writes pile up; they go out together as soon as it ends.
    while (this.#inserts.size + this.#updates.size > 0) {
      // One turn of the event loop before taking the batch lets callers that were waiting on the
      // previous commit (PGlite runs on this thread) queue their updates, which then merge.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const inserts = take(this.#inserts, this.#batchSize);
      const updates = take(this.#updates, this.#batchSize);
      const served: Waiter[] = [];
      this.#waiters = this.#waiters.filter((waiter) => {
        waiter.inserts -= inserts.length;
        waiter.updates -= updates.length;
        if (waiter.inserts > 0 || waiter.updates > 0) return true;
        served.push(waiter);
        return false;
      });
      this.#inFlight = inserts.length + updates.length;
      this.#batch = this.#writeBatch(inserts, updates);
      try {
        await this.#batch;
      } finally {
        this.#inFlight = 0;
        this.#batch = undefined;
        for (const waiter of served) waiter.resolve();
      }
    }
    // The queue is empty, so everything queued before any remaining flush is done (a waiter can
    // over-count when a record replaced a queued update after the flush call).
    const rest = this.#waiters;
    this.#waiters = [];
    for (const waiter of rest) waiter.resolve();
  }

  async #writeBatch(inserts: PendingRow[], updates: PendingUpdate[]): Promise<void> {
    const size = inserts.length + updates.length;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#execute(inserts, updates);
        this.#counters.written += size;
        return;
      } catch (error) {
        if (isDataError(error)) {
          // One bad row must not cost the whole batch: write them one by one.
          await this.#isolate(inserts, updates, error);
          return;
        }
        if (attempt >= this.#attempts) {
          this.#runner.reset();
          this.#counters.lost += size;
          this.#log.error("lineage batch lost after retries", {
            rows: inserts.length,
            updates: updates.length,
            attempts: attempt,
            error: errorText(error),
            lost: this.#counters.lost,
          });
          return;
        }
        this.#runner.reset();
        this.#counters.retriedWrites += size;
        const delay = Math.min(this.#retryDelayMs * 2 ** (attempt - 1), this.#maxRetryDelayMs);
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
    if (updates.length > 0) work.push(this.#runner.execute(...statement(updateRowsStatement(updates))));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`lineage commit did not finish within ${this.#attemptTimeoutMs} ms`)),
        this.#attemptTimeoutMs,
      );
    });
    try {
      await Promise.race([Promise.all(work), timeout]);
    } finally {
      clearTimeout(timer);
      // A timed-out statement may still settle later; its outcome no longer matters.
      for (const w of work) w.catch(() => {});
    }
  }

  /**
   * New rows go out as a plain COPY where the runner can (PGlite); a batch holding an id that is
   * already stored (a retried batch whose first attempt did commit, or a row recorded twice) fails
   * as a whole with unique_violation and is sent again as the upsert, which is idempotent.
   */
  async #insert(rows: PendingRow[]): Promise<void> {
    const runner = this.#runner;
    if (runner.copy !== undefined) {
      const csv = copyRowsCsv(rows);
      try {
        await runner.copy(COPY_ROWS_SQL, csv);
        return;
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code !== UNIQUE_VIOLATION) throw error;
      }
    }
    await runner.execute(...statement(insertRowsStatement(rows)));
  }

  async #isolate(inserts: PendingRow[], updates: PendingUpdate[], cause: unknown): Promise<void> {
    this.#log.warn("lineage batch rejected by the database; writing its rows one by one", {
      error: errorText(cause),
    });
    for (const [rows, ups] of [
      ...inserts.map((row) => [[row], []] as const),
      ...updates.map((up) => [[], [up]] as const),
    ]) {
      try {
        await this.#execute([...rows], [...ups]);
        this.#counters.written++;
      } catch (error) {
        this.#counters.lost++;
        this.#log.error("lineage write rejected; lost", {
          id: rows[0]?.id ?? ups[0]?.id,
          error: errorText(error),
          lost: this.#counters.lost,
        });
      }
    }
  }
}

const UNIQUE_VIOLATION = "23505";

function statement(s: { text: string; params: readonly unknown[] }): [string, readonly unknown[]] {
  return [s.text, s.params];
}

function take<V>(map: Map<string, V>, max: number): V[] {
  const out: V[] = [];
  for (const [key, value] of map) {
    if (out.length >= max) break;
    out.push(value);
    map.delete(key);
  }
  return out;
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
