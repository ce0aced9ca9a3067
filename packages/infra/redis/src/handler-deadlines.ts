/** A running handler that must be aborted at `deadline` (epoch ms) unless it finished first. */
export interface Deadline {
  readonly deadline: number;
  readonly controller: AbortController;
  readonly reason: () => unknown;
}

/**
 * The handler timeouts of one subscription on one timer, armed for the earliest deadline, instead of
 * a timer per delivery: on the hot path a delivery only joins and leaves a set. The timer is
 * cleared when the set empties, so nothing keeps the process alive once every handler finished.
 */
export class HandlerDeadlines {
  private readonly entries = new Set<Deadline>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;

  add(entry: Deadline): void {
    this.entries.add(entry);
    if (entry.deadline < this.armedFor) this.arm(entry.deadline);
  }

  delete(entry: Deadline): void {
    this.entries.delete(entry);
    if (this.entries.size === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.armedFor = Number.POSITIVE_INFINITY;
    }
  }

  /** Aborts every running handler with `reason` (a stop) and forgets them. */
  abortAll(reason: unknown): void {
    for (const entry of [...this.entries]) {
      this.delete(entry);
      entry.controller.abort(reason);
    }
  }

  private arm(at: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, at - Date.now()));
  }

  private sweep(): void {
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.entries) {
      if (entry.deadline <= now) {
        this.entries.delete(entry);
        entry.controller.abort(entry.reason());
      } else if (entry.deadline < next) next = entry.deadline;
    }
    if (next < this.armedFor && this.entries.size > 0) this.arm(next);
  }
}
