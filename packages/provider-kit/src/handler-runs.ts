import type { Delivery, MessageHandler } from "@factflow/protocols";
import { DeadlineSweep, HandlerRun } from "./deadline-sweep.js";
import { type HandlerOutcome, runHandler } from "./settlement.js";
import { SignalPool } from "./signal-pool.js";

/** Options of {@link HandlerRuns}. */
export interface HandlerRunsOptions {
  /** The subscription's `handlerTimeoutMs`. */
  readonly timeoutMs: number;
  /** The subscription's `releasesSignal`: settled deliveries' controllers serve later ones. */
  readonly releasesSignal: boolean;
  /** Controllers kept for reuse at most (the subscription's `concurrency`). */
  readonly concurrency: number;
}

/**
 * The running handlers of one subscription: each delivery's {@link HandlerRun} on one
 * {@link DeadlineSweep} (one timer for every handler's timeout), its controller from a
 * {@link SignalPool}. The rule that makes reuse safe lives here: a run leaves the sweep (so neither a
 * timeout nor {@link abortAll} can reach it) before its controller goes back to the pool.
 */
export class HandlerRuns {
  readonly #sweep = new DeadlineSweep<HandlerRun>();
  readonly #pool: SignalPool;
  readonly #timeoutMs: number;
  /** Runs not ended yet, those waiting for a returned handler's `settleAfter` included. */
  readonly #live = new Set<Promise<HandlerOutcome>>();

  constructor(options: HandlerRunsOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#pool = new SignalPool(options.releasesSignal, options.concurrency);
  }

  /**
   * Runs `handler` for `delivery` until it settles, times out or is aborted (see `runHandler`).
   * With `stopWhen`, the run is also aborted (with its reason) when that signal aborts. `onReturned`
   * frees the caller's concurrency slot once the handler has returned and only its `settleAfter` is
   * awaited.
   */
  run(
    handler: MessageHandler,
    delivery: Delivery,
    stopWhen?: AbortSignal,
    onReturned?: () => void,
  ): Promise<HandlerOutcome> {
    const outcome = this.#run(handler, delivery, stopWhen, onReturned);
    this.#live.add(outcome);
    const ended = () => this.#live.delete(outcome);
    void outcome.then(ended, ended);
    return outcome;
  }

  /**
   * Resolves once every run has ended, and the caller's continuation of each has run. After
   * {@link abortAll} only runs whose handler returned in time are left, waiting for their
   * `settleAfter`: a stopping subscription awaits them (bounded) so it settles those deliveries
   * instead of handing back messages whose work is done.
   */
  async drain(): Promise<void> {
    while (this.#live.size > 0) {
      await Promise.allSettled([...this.#live]);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  async #run(
    handler: MessageHandler,
    delivery: Delivery,
    stopWhen: AbortSignal | undefined,
    onReturned: (() => void) | undefined,
  ): Promise<HandlerOutcome> {
    const run = new HandlerRun(this.#timeoutMs, this.#pool);
    const stop = stopWhen === undefined ? undefined : () => run.abort(stopWhen.reason);
    if (stopWhen?.aborted === true) stop?.();
    else if (stop !== undefined) stopWhen?.addEventListener("abort", stop, { once: true });
    this.#sweep.add(run);
    try {
      return await runHandler(handler, delivery, run, onReturned);
    } finally {
      this.#sweep.delete(run);
      if (stop !== undefined) stopWhen?.removeEventListener("abort", stop);
      run.release();
    }
  }

  /** Aborts every handler still running (the subscription stops); none of them times out later. */
  abortAll(reason: unknown): void {
    for (const run of this.#sweep.clear()) run.abort(reason);
  }
}

/**
 * `fn`, callable many times, run the first time only: a subscription's slot release, called both
 * when the handler returned (see {@link HandlerRuns.run}'s `onReturned`) and when the delivery is
 * settled, frees the slot once.
 */
export function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
