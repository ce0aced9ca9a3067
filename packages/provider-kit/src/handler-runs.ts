import {
  type Delivery,
  type HandlerResult,
  isHandlerTimeout,
  type MessageHandler,
  settleAfterOf,
} from "@factflow/protocols";
import { DeadlineSweep, HandlerRun } from "./deadline-sweep.js";
import { type HandlerOutcome, runHandler } from "./settlement.js";
import { SignalPool } from "./signal-pool.js";

/**
 * Who hears how a run {@link HandlerRuns.start}ed ends, with the `job` it was started with: one
 * object per subscription, so a delivery costs no callbacks of its own.
 */
export interface RunWatcher<J> {
  /** The handler returned in time with a `settleAfter` still pending (its slot can serve another). */
  returned(job: J): void;
  /** The outcome, once: when the handler settles, times out or is aborted (see `runHandler`). */
  settled(job: J, outcome: HandlerOutcome): void;
}

/** Options of {@link HandlerRuns}. */
export interface HandlerRunsOptions {
  /** The subscription's `handlerTimeoutMs`. */
  readonly timeoutMs: number;
  /** The subscription's `releasesSignal`: settled deliveries' controllers serve later ones. */
  readonly releasesSignal: boolean;
  /** Controllers kept for reuse at least (the subscription's `concurrency`; see `SignalPool`). */
  readonly concurrency: number;
  /**
   * The handler never sees its signal (it declares one parameter): a pooled controller then needs
   * no check for listeners left on its signal.
   */
  readonly signalUnseen?: boolean;
  /**
   * Called when a handler returns or throws after its timeout or an abort already settled its
   * delivery (its result is dropped), e.g. to count it `superseded`.
   */
  readonly onLate?: () => void;
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
  readonly #onLate: (() => void) | undefined;
  /** Runs not ended yet, those waiting for a returned handler's `settleAfter` included. */
  readonly #live = new Set<Promise<HandlerOutcome>>();

  constructor(options: HandlerRunsOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#onLate = options.onLate;
    this.#pool = new SignalPool(options.releasesSignal, options.concurrency, options.signalUnseen);
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
      return await runHandler(handler, delivery, run, onReturned, this.#onLate);
    } finally {
      this.#sweep.delete(run);
      if (stop !== undefined) stopWhen?.removeEventListener("abort", stop);
      run.release();
    }
  }

  /**
   * Runs `handler` for `delivery` as {@link run} does, but tells `watcher` instead of returning a
   * promise: a handler that returns a result synchronously is settled before this returns, and one
   * that returns a promise costs one reaction on it, no more. For a subscription's hot path; runs
   * started here are not awaited by {@link drain}.
   */
  start<J>(handler: MessageHandler, delivery: Delivery, watcher: RunWatcher<J>, job: J): void {
    const run = new WatchedRun(this.#timeoutMs, this.#pool, this.#sweep, this.#onLate, watcher, job);
    this.#sweep.add(run);
    run.begin(handler, delivery);
  }

  /** Aborts every handler still running (the subscription stops); none of them times out later. */
  abortAll(reason: unknown): void {
    for (const run of this.#sweep.clear()) run.abort(reason);
  }

  /**
   * Aborts the handlers, started with {@link start}, whose `job` `lost` says no longer counts (its
   * delivery's channel closed, so the broker hands the message out again): their results could
   * settle nothing, and a handler parked on its delivery (a stateful batch member) would otherwise
   * keep it until a timer, while the redelivered copy waits behind it. Their outcome is `stopped`.
   */
  abortWhere<J>(lost: (job: J) => boolean, reason: unknown): void {
    const runs: WatchedRun<J>[] = [];
    for (const run of this.#sweep.values())
      if (run instanceof WatchedRun && !run.hasReturned && lost(run.job as J))
        runs.push(run as WatchedRun<J>);
    for (const run of runs) run.abort(reason);
  }
}

/**
 * One run of {@link HandlerRuns.start}: `runHandler`'s rules, without a promise of its own. It leaves
 * the sweep and gives its controller back before its watcher hears the outcome, as `run` does.
 */
class WatchedRun<J> extends HandlerRun {
  readonly #sweep: DeadlineSweep<HandlerRun>;
  readonly #onLate: (() => void) | undefined;
  readonly #watcher: RunWatcher<J>;
  readonly #job: J;
  #done = false;
  /** Set once the handler has returned in time: an abort while its `settleAfter` runs changes nothing. */
  #returned: HandlerResult | undefined;

  /** What the run was started with (see {@link HandlerRuns.start}). */
  get job(): J {
    return this.#job;
  }

  /** True once the handler returned in time (only its `settleAfter` may still run). */
  get hasReturned(): boolean {
    return this.#returned !== undefined || this.#done;
  }

  constructor(
    timeoutMs: number,
    pool: SignalPool,
    sweep: DeadlineSweep<HandlerRun>,
    onLate: (() => void) | undefined,
    watcher: RunWatcher<J>,
    job: J,
  ) {
    super(timeoutMs, pool);
    this.#sweep = sweep;
    this.#onLate = onLate;
    this.#watcher = watcher;
    this.#job = job;
  }

  /**
   * Calls the handler. Its controller is fresh or a pooled one never aborted, and only this run
   * aborts it (through {@link abort}, which settles the run): so an aborted signal always finds the
   * run done, and the handler's result needs no look at the signal.
   */
  begin(handler: MessageHandler, delivery: Delivery): void {
    const signal = this.controller.signal;
    let pending: Promise<HandlerResult> | HandlerResult;
    try {
      pending = handler(delivery, signal);
    } catch (error) {
      this.#finish({ kind: "threw", error });
      return;
    }
    if (typeof (pending as Promise<HandlerResult> | undefined)?.then === "function") {
      (pending as Promise<HandlerResult>).then(
        (result) => this.#result(result),
        (error: unknown) => this.#error(error),
      );
    } else this.#result(pending as HandlerResult);
  }

  override abort(reason: unknown): void {
    super.abort(reason);
    if (this.#returned === undefined) this.#finish(abortedOutcome(this.controller.signal));
  }

  #result(result: HandlerResult): void {
    if (this.#done) {
      this.#onLate?.();
      return;
    }
    const after = settleAfterOf(result);
    if (after === undefined) {
      this.#finish({ kind: "returned", result });
      return;
    }
    this.#returned = result;
    this.#watcher.returned(this.#job);
    after.then(
      () => this.#finish({ kind: "returned", result }),
      () => this.#finish({ kind: "returned", result }),
    );
  }

  #error(error: unknown): void {
    if (this.#done) {
      this.#onLate?.();
      return;
    }
    this.#finish({ kind: "threw", error });
  }

  #finish(outcome: HandlerOutcome): void {
    if (this.#done) return;
    this.#done = true;
    this.#sweep.delete(this);
    this.release();
    this.#watcher.settled(this.#job, outcome);
  }
}

function abortedOutcome(signal: AbortSignal): HandlerOutcome {
  return isHandlerTimeout(signal.reason)
    ? { kind: "timed-out", timeoutMs: signal.reason.timeoutMs }
    : { kind: "stopped" };
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
