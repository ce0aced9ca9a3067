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
