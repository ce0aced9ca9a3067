import type { LineageStatus } from "@factflow/protocols";
import type { PendingRow } from "./lineage-sql.js";

/** Statuses of a row whose hop has not settled yet. */
const OPEN: ReadonlySet<LineageStatus> = new Set<LineageStatus>(["pending", "initiated", "processing"]);

export function isOpenStatus(status: LineageStatus): boolean {
  return OPEN.has(status);
}

interface Held {
  readonly row: PendingRow;
  /** `performance.now()` when the row was first held. */
  readonly at: number;
}

/**
 * Open rows the writer keeps back, so a hop that settles quickly is written once, already settled,
 * instead of inserted open and updated later. A row leaves the hold when it settles (the writer then
 * queues it as an insert) or when it has been held `holdMs` (`onRelease` queues it still open, so a
 * slow or stuck hop shows up as it does without the hold).
 *
 * Rows are kept in the order they were first held, which is also the order their time runs out.
 */
export class OpenRowHold {
  readonly #holdMs: number;
  readonly #onRelease: (rows: PendingRow[]) => void;
  readonly #rows = new Map<string, Held>();
  /** How many held rows name each parent id (see {@link holdsChildOf}). */
  readonly #children = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(holdMs: number, onRelease: (rows: PendingRow[]) => void) {
    this.#holdMs = holdMs;
    this.#onRelease = onRelease;
  }

  get enabled(): boolean {
    return this.#holdMs > 0;
  }

  get size(): number {
    return this.#rows.size;
  }

  get(id: string): PendingRow | undefined {
    return this.#rows.get(id)?.row;
  }

  /** When the row was first held (`performance.now()`), or undefined when it is not held. */
  heldSince(id: string): number | undefined {
    return this.#rows.get(id)?.at;
  }

  /** Holds a new open row (its id must not be held already). */
  add(row: PendingRow): void {
    this.#rows.set(row.id, { row, at: performance.now() });
    this.#count(row, 1);
    if (this.#timer === undefined) this.#arm(this.#holdMs);
  }

  /** Replaces a held row, keeping the time it was first held (a re-record does not extend the hold). */
  replace(row: PendingRow): void {
    const held = this.#rows.get(row.id);
    if (held === undefined) this.add(row);
    else {
      this.#count(held.row, -1);
      this.#rows.set(row.id, { row, at: held.at });
      this.#count(row, 1);
    }
  }

  /** Takes a row out of the hold (it settled, or another lane takes it over). */
  take(id: string): PendingRow | undefined {
    const held = this.#rows.get(id);
    if (held === undefined) return undefined;
    this.#rows.delete(id);
    this.#count(held.row, -1);
    if (this.#rows.size === 0) this.#disarm();
    return held.row;
  }

  /** Held rows of one execution: open in lineage, though not stored yet. */
  openOf(executionId: string): number {
    let n = 0;
    for (const held of this.#rows.values()) if (held.row.execution_id === executionId) n++;
    return n;
  }

  /** Every held row, oldest first, leaving the hold empty. */
  drain(): PendingRow[] {
    const rows = [...this.#rows.values()].map((h) => h.row);
    this.#rows.clear();
    this.#children.clear();
    this.#disarm();
    return rows;
  }

  /** True while a held row names `id` as its parent. */
  holdsChildOf(id: string): boolean {
    return this.#children.has(id);
  }

  /** Keeps the count of held rows per parent id (a parent id is always set before it is counted). */
  #count(row: PendingRow, delta: 1 | -1): void {
    const parent = row.parent_id;
    if (parent === null) return;
    const n = (this.#children.get(parent) ?? 0) + delta;
    if (n > 0) this.#children.set(parent, n);
    else this.#children.delete(parent);
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
    for (const [id, held] of this.#rows) {
      const left = held.at + this.#holdMs - now;
      if (left > 0) {
        next = left;
        break;
      }
      due.push(held.row);
      this.#rows.delete(id);
      this.#count(held.row, -1);
    }
    if (next !== undefined) this.#arm(next);
    if (due.length > 0) this.#onRelease(due);
  }
}

/** A message row still `pending`: its message waits in a queue, no hop runs it yet. */
function isWaiting(row: PendingRow): boolean {
  return row.kind === "message" && row.status === "pending";
}

/**
 * The writer's two holds: a message row whose message waits in a queue (`pending`) is held for
 * `waitingMs`, every other open row (a hop that runs) for `holdMs`. A waiting row whose hop starts
 * moves to the shorter hold, from then on, so a slow hop shows up `holdMs` after it started.
 *
 * A row is never released before its parent: only message rows wait, and a message row's parent is
 * an adapter row recorded before it, held for less time; {@link drain} gives the running rows first.
 */
export class OpenRowHolds {
  readonly #running: OpenRowHold;
  readonly #waiting: OpenRowHold;
  readonly #holdMs: number;
  readonly #waitingMs: number;

  constructor(holdMs: number, waitingMs: number, onRelease: (rows: PendingRow[]) => void) {
    this.#holdMs = holdMs;
    this.#waitingMs = holdMs > 0 ? Math.max(holdMs, waitingMs) : 0;
    this.#running = new OpenRowHold(holdMs, onRelease);
    this.#waiting = new OpenRowHold(this.#waitingMs, onRelease);
  }

  get enabled(): boolean {
    return this.#running.enabled;
  }

  get size(): number {
    return this.#running.size + this.#waiting.size;
  }

  get(id: string): PendingRow | undefined {
    return this.#running.get(id) ?? this.#waiting.get(id);
  }

  add(row: PendingRow): void {
    (isWaiting(row) ? this.#waiting : this.#running).add(row);
  }

  /** Replaces a held row, keeping the time it was first held (see {@link changed} for a hop start). */
  replace(row: PendingRow): void {
    if (this.#waiting.get(row.id) === undefined) this.#running.replace(row);
    else {
      this.#waiting.replace(row);
      this.changed(row);
    }
  }

  /** After a held row changed in place: a waiting row whose hop started moves to the shorter hold. */
  changed(row: PendingRow): void {
    if (isWaiting(row)) return;
    const since = this.#waiting.heldSince(row.id);
    if (since === undefined) return;
    // Already due sooner than a running row's time from now: it leaves when it was going to.
    if (since + this.#waitingMs <= performance.now() + this.#holdMs) return;
    this.#waiting.take(row.id);
    this.#running.add(row);
  }

  take(id: string): PendingRow | undefined {
    return this.#running.take(id) ?? this.#waiting.take(id);
  }

  openOf(executionId: string): number {
    return this.#running.openOf(executionId) + this.#waiting.openOf(executionId);
  }

  /** Every held row, the running ones (the parents) first, each hold oldest first. */
  drain(): PendingRow[] {
    return [...this.#running.drain(), ...this.#waiting.drain()];
  }

  holdsChildOf(id: string): boolean {
    return this.#running.holdsChildOf(id) || this.#waiting.holdsChildOf(id);
  }
}
