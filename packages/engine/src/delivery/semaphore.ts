import type { Cancellation } from "./delivery-signal.js";

/** What a wait can be cut short by: an `AbortSignal`, or a delivery's {@link Cancellation}. */
export type WaitSignal = AbortSignal | Cancellation;

/** Calls `onAbort` once when `signal` aborts; returns the function that stops watching. */
function watchAbort(signal: WaitSignal, onAbort: () => void): () => void {
  if ("onCancel" in signal) return signal.onCancel(onAbort);
  signal.addEventListener("abort", onAbort, { once: true });
  return () => signal.removeEventListener("abort", onAbort);
}

/**
 * A counting semaphore with FIFO waiters. `acquire` resolves when a permit is free or rejects when
 * the signal aborts first (the permit is then never taken).
 */
export class Semaphore {
  #available: number;
  readonly #waiters: Array<() => void> = [];

  constructor(readonly permits: number) {
    this.#available = permits;
  }

  get available(): number {
    return this.#available;
  }

  /** Waiters not yet granted a permit. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Takes a permit at once when one is free and nobody waits; false otherwise (then `acquire`). */
  tryAcquire(): boolean {
    if (this.#available > 0 && this.#waiters.length === 0) {
      this.#available--;
      return true;
    }
    return false;
  }

  acquire(signal?: WaitSignal): Promise<void> {
    if (this.#available > 0 && this.#waiters.length === 0) {
      this.#available--;
      return Promise.resolve();
    }
    return enqueue(this.#waiters, signal);
  }

  release(): void {
    const next = this.#waiters.shift();
    if (next) next();
    else this.#available = Math.min(this.permits, this.#available + 1);
  }
}

/**
 * The fan-out watermark of one route: publishes pending may not exceed `highWater`. A delivery
 * waits (`whenBelow`) before starting work while the route is saturated.
 */
export class Watermark {
  #pending = 0;
  #completed = 0;
  readonly #waiters: Array<() => void> = [];

  constructor(readonly highWater: number) {}

  get pending(): number {
    return this.#pending;
  }

  /** Publishes done since the start (confirmed, failed or given up): a sign of progress. */
  get completed(): number {
    return this.#completed;
  }

  add(count: number): void {
    this.#pending += count;
  }

  done(count = 1): void {
    this.#completed += count;
    this.#pending = Math.max(0, this.#pending - count);
    while (this.#pending < this.highWater && this.#waiters.length > 0) this.#waiters.shift()?.();
  }

  /** True when a delivery may start without waiting (`whenBelow` would resolve at once). */
  get isBelow(): boolean {
    return this.#pending < this.highWater;
  }

  whenBelow(signal?: WaitSignal): Promise<void> {
    if (this.#pending < this.highWater) return Promise.resolve();
    return enqueue(this.#waiters, signal);
  }
}

/**
 * Queues a waiter on `waiters` that resolves when it is called, or rejects with the signal's reason
 * (leaving the queue) when `signal` aborts first, or has already.
 */
function enqueue(waiters: Array<() => void>, signal: WaitSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason ?? new Error("aborted"));
      return;
    }
    let unwatch: (() => void) | undefined;
    const wake = () => {
      unwatch?.();
      resolve();
    };
    if (signal !== undefined)
      unwatch = watchAbort(signal, () => {
        const index = waiters.indexOf(wake);
        if (index >= 0) waiters.splice(index, 1);
        reject(signal.reason ?? new Error("aborted"));
      });
    waiters.push(wake);
  });
}
