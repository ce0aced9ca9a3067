import { HandlerTimeoutError } from "@factflow/protocols";
import type { SignalPool } from "./signal-pool.js";

/** Something that must give up at `deadline` (epoch ms) unless removed from its sweep first. */
export interface Expiring {
  readonly deadline: number;
  /** Called once, when the deadline passed before the entry was removed. */
  expire(): void;
}

/**
 * Deadlines of many in-flight operations (publishes awaiting their confirm, running handlers) on one
 * timer, armed for the earliest deadline, instead of a timer per operation: on the hot path an
 * operation only joins and leaves a set. The timer is unreferenced whenever the set empties, so
 * nothing keeps the process alive once every operation has settled.
 */
export class DeadlineSweep<T extends Expiring> {
  private readonly entries = new Set<T>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Number.POSITIVE_INFINITY;
  /** The timer keeps the process alive: only while there are entries. */
  private held = false;

  add(entry: T): void {
    this.entries.add(entry);
    if (entry.deadline < this.armedFor) this.arm(entry.deadline);
    else if (!this.held) {
      (this.timer as NodeJS.Timeout).ref();
      this.held = true;
    }
  }

  /**
   * Removes an entry that settled in time; its `expire` will not be called. The last one out leaves
   * the timer armed but unreferenced (nothing keeps the process alive for it), so that a subscription
   * handling one delivery at a time does not clear and set a timer per delivery.
   */
  delete(entry: T): void {
    this.entries.delete(entry);
    if (this.entries.size === 0 && this.held) {
      (this.timer as NodeJS.Timeout).unref();
      this.held = false;
    }
  }

  /**
   * Removes every entry (a stop: none of them will expire) and returns them, in insertion order, e.g.
   * to abort the handlers still running.
   */
  clear(): T[] {
    const all = [...this.entries];
    for (const entry of all) this.delete(entry);
    return all;
  }

  /** Entries not yet settled nor expired, in insertion order. */
  values(): IterableIterator<T> {
    return this.entries.values();
  }

  private arm(at: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.sweep(), Math.max(0, at - Date.now()));
    this.held = true;
  }

  private sweep(): void {
    this.timer = undefined;
    this.armedFor = Number.POSITIVE_INFINITY;
    this.held = false;
    const now = Date.now();
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.entries) {
      if (entry.deadline <= now) {
        this.entries.delete(entry);
        entry.expire();
      } else if (entry.deadline < next) next = entry.deadline;
    }
    // `expire` may have added entries (and armed the timer for them) while this loop ran.
    if (next < this.armedFor) this.arm(next);
  }
}

/**
 * A handler in progress, for a {@link DeadlineSweep}: its abort signal is aborted with a
 * `HandlerTimeoutError` when its timeout passes before it is removed from the sweep.
 *
 * Abort it with {@link abort}, not through `controller`: `runHandler` then learns of it
 * directly instead of through an `abort` listener on the signal. With a {@link SignalPool} (the
 * subscriber set `releasesSignal`) the controller comes from the pool and goes back to it on
 * {@link release}, so a delivery costs no new `AbortController` (and no new `AbortSignal`).
 */
export class HandlerRun implements Expiring {
  readonly controller: AbortController;
  readonly deadline: number;
  readonly #timeoutMs: number;
  readonly #pool: SignalPool | undefined;
  #onAbort: (() => void) | undefined;

  constructor(timeoutMs: number, pool?: SignalPool) {
    this.#timeoutMs = timeoutMs;
    this.#pool = pool;
    this.controller = pool === undefined ? new AbortController() : pool.take();
    this.deadline = Date.now() + timeoutMs;
  }

  /** Aborts the handler's signal with `reason`; a `runHandler` running it settles at once. */
  abort(reason: unknown): void {
    this.controller.abort(reason);
    const onAbort = this.#onAbort;
    this.#onAbort = undefined;
    onAbort?.();
  }

  expire(): void {
    this.abort(new HandlerTimeoutError(this.#timeoutMs));
  }

  /** Called by `runHandler`: `onAbort` runs once if {@link abort} is called before {@link release}. */
  watch(onAbort: () => void): void {
    this.#onAbort = onAbort;
  }

  /**
   * The delivery has settled: nothing is watched any more, and the controller goes back to the pool
   * if there is one (the pool keeps it only if its signal was never aborted and has no listener left).
   */
  release(): void {
    this.#onAbort = undefined;
    this.#pool?.give(this.controller);
  }
}
