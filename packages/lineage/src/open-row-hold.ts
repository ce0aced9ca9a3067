import type { LineageStatus } from "@factflow/protocols";
import type { PendingRow } from "./lineage-sql.js";

/** Statuses of a row whose hop has not settled yet. */
const OPEN: ReadonlySet<LineageStatus> = new Set<LineageStatus>(["pending", "initiated", "processing"]);

export function isOpenStatus(status: LineageStatus): boolean {
  return OPEN.has(status);
}

/**
 * A `message` row still `pending`: its message waits in a queue (or for its retry) and no handler
 * runs it yet. The broker holds the message itself, so nothing about it is running to show.
 */
function isWaiting(row: PendingRow): boolean {
  return row.kind === "message" && row.status === "pending";
}

interface Held {
  readonly row: PendingRow;
  /** `performance.now()` when the row was first held, or started running after waiting. */
  readonly at: number;
}

/**
 * Open rows the writer keeps back, so a hop that settles quickly is written once, already settled,
 * instead of inserted open and updated later. A row leaves the hold when it settles (the writer then
 * queues it as an insert) or when it has been running `holdMs` (`onRelease` queues it still open, so
 * a slow or stuck hop shows up as it runs).
 *
 * A message row that is still `pending` waits in a queue: it is kept without a deadline until it
 * runs (marked `processing`, then `holdMs` as any running row) or settles, since what waits is the
 * broker's to show, not lineage's. At most `maxWaiting` such rows are kept; beyond that the oldest
 * are released open, which bounds the memory a deep backlog takes.
 *
 * Each group is kept in the order its rows were held, which for running rows is also the order their
 * time runs out.
 */
export class OpenRowHold {
  readonly #holdMs: number;
  readonly #maxWaiting: number;
  readonly #onRelease: (rows: PendingRow[]) => void;
  readonly #running = new Map<string, Held>();
  readonly #waiting = new Map<string, PendingRow>();
  #timer: NodeJS.Timeout | undefined;

  constructor(holdMs: number, onRelease: (rows: PendingRow[]) => void, maxWaiting = MAX_WAITING) {
    this.#holdMs = holdMs;
    this.#maxWaiting = maxWaiting;
    this.#onRelease = onRelease;
  }

  get enabled(): boolean {
    return this.#holdMs > 0;
  }

  get size(): number {
    return this.#running.size + this.#waiting.size;
  }

  get(id: string): PendingRow | undefined {
    return this.#waiting.get(id) ?? this.#running.get(id)?.row;
  }

  /** Holds a new open row (its id must not be held already). */
  add(row: PendingRow): void {
    if (isWaiting(row)) {
      this.#waiting.set(row.id, row);
      if (this.#waiting.size > this.#maxWaiting) this.#releaseOldestWaiting();
      return;
    }
    this.#running.set(row.id, { row, at: performance.now() });
    if (this.#timer === undefined) this.#arm(this.#holdMs);
  }

  /**
   * After a held row changed (replaced, or updated in place) and is still open: a waiting message row
   * that now runs starts its `holdMs`; a running row keeps the time it was first held.
   */
  changed(row: PendingRow): void {
    if (this.#waiting.has(row.id)) {
      if (isWaiting(row)) {
        this.#waiting.set(row.id, row);
        return;
      }
      this.#waiting.delete(row.id);
      this.add(row);
      return;
    }
    const held = this.#running.get(row.id);
    if (held === undefined) this.add(row);
    else this.#running.set(row.id, { row, at: held.at });
  }

  /** Takes a row out of the hold (it settled, or another lane takes it over). */
  take(id: string): PendingRow | undefined {
    const waiting = this.#waiting.get(id);
    if (waiting !== undefined) {
      this.#waiting.delete(id);
      return waiting;
    }
    const held = this.#running.get(id);
    if (held === undefined) return undefined;
    this.#running.delete(id);
    if (this.#running.size === 0) this.#disarm();
    return held.row;
  }

  /** Held rows of one execution: open in lineage, though not stored yet. */
  openOf(executionId: string): number {
    let n = 0;
    for (const row of this.#waiting.values()) if (row.execution_id === executionId) n++;
    for (const held of this.#running.values()) if (held.row.execution_id === executionId) n++;
    return n;
  }

  /** Every held row, oldest first within each group, leaving the hold empty. */
  drain(): PendingRow[] {
    const rows = [...this.#waiting.values(), ...[...this.#running.values()].map((h) => h.row)];
    this.#waiting.clear();
    this.#running.clear();
    this.#disarm();
    return rows;
  }

  #releaseOldestWaiting(): void {
    // A tenth at a time, so a backlog at the bound releases in batches, not row by row.
    const count = Math.max(1, Math.ceil(this.#maxWaiting / 10));
    const due: PendingRow[] = [];
    for (const [id, row] of this.#waiting) {
      if (due.length >= count) break;
      due.push(row);
      this.#waiting.delete(id);
    }
    this.#onRelease(due);
  }

  #arm(delayMs: number): void {
    this.#timer = setTimeout(() => this.#expire(), Math.max(0, delayMs));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #expire(): void {
    this.#timer = undefined;
    const now = performance.now();
    const due: PendingRow[] = [];
    let next: number | undefined;
    for (const [id, held] of this.#running) {
      const left = held.at + this.#holdMs - now;
      if (left > 0) {
        next = left;
        break;
      }
      due.push(held.row);
      this.#running.delete(id);
    }
    if (next !== undefined) this.#arm(next);
    if (due.length > 0) this.#onRelease(due);
  }
}

/** Default bound on waiting message rows held at once (see {@link OpenRowHold}). */
const MAX_WAITING = 20_000;
