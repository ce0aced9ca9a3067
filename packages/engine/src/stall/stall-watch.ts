import { performance } from "node:perf_hooks";
import type { StallDiagnosis } from "./stall-diagnosis.js";

/** A running execution is called stalled after this long without progress. @default 30 s */
export const DEFAULT_STALL_AFTER_MS = 30_000;

export interface StallWatchOptions {
  /** Quiet time after which the execution is diagnosed as stalled; 0 only tracks progress. */
  readonly afterMs: number;
  /**
   * A number that changes whenever the execution does something (a delivery starts, settles or
   * parks, an output is published). Read on a timer, so the hot path pays one counter update.
   */
  readonly sample: () => number;
  /** What the execution waits for (bounded reads of lineage and the broker; never rejects). */
  readonly diagnose: () => Promise<StallDiagnosis>;
  /** Called once per stall: the execution made no progress for `afterMs`. */
  readonly onStall: (diagnosis: StallDiagnosis) => void;
  /** Called when a reported stall ends: the execution made progress again after `quietMs`. */
  readonly onResume: (quietMs: number) => void;
  /**
   * Other processes consume the execution too (cluster mode): its progress there is invisible here,
   * so a stall is only reported once its lineage has not changed across two diagnoses `afterMs`
   * apart.
   */
  readonly shared?: boolean;
}

/**
 * Notices that an execution has stopped making progress. One unref'd timer per execution samples a
 * progress counter; after `afterMs` without a change it diagnoses the execution once and reports it,
 * and reports nothing more until the execution has moved again.
 */
export class StallWatch {
  readonly #options: StallWatchOptions;
  #timer: NodeJS.Timeout | undefined;
  #sample: number;
  #lastProgress = performance.now();
  #checking = false;
  #stall: StallDiagnosis | undefined;
  /** Shared executions: the lineage seen by the last diagnosis that did not report. */
  #fingerprint: string | undefined;

  constructor(options: StallWatchOptions) {
    this.#options = options;
    this.#sample = options.sample();
  }

  start(): void {
    const { afterMs } = this.#options;
    if (afterMs <= 0 || this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#tick(), Math.min(1000, Math.max(20, afterMs / 4)));
    this.#timer.unref();
  }

  stop(): void {
    // Progress made since the last tick still ends a reported stall, and says so.
    if (this.#timer !== undefined) this.#observe();
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Milliseconds since the execution last made progress. */
  quietMs(): number {
    this.#observe();
    return performance.now() - this.#lastProgress;
  }

  /** The stall reported and not yet over, with its quiet time brought up to date. */
  current(): StallDiagnosis | undefined {
    const stall = this.#stall;
    if (stall === undefined) return undefined;
    const quietMs = Math.round(this.quietMs());
    // Progress since the report ended it (quietMs observed it).
    if (this.#stall === undefined) return undefined;
    return { ...stall, quietMs };
  }

  /** Samples the progress counter; a change is progress, and ends a reported stall. */
  #observe(): boolean {
    const sample = this.#options.sample();
    if (sample === this.#sample) return false;
    const now = performance.now();
    const quiet = now - this.#lastProgress;
    this.#sample = sample;
    this.#lastProgress = now;
    this.#fingerprint = undefined;
    if (this.#stall !== undefined) {
      this.#stall = undefined;
      this.#options.onResume(quiet);
    }
    return true;
  }

  #tick(): void {
    if (this.#observe() || this.#stall !== undefined || this.#checking) return;
    if (performance.now() - this.#lastProgress < this.#options.afterMs) return;
    this.#checking = true;
    const since = this.#lastProgress;
    void this.#options
      .diagnose()
      .then((diagnosis) => {
        // Moved while it was being diagnosed, or stopped: not a stall.
        if (this.#observe() || this.#timer === undefined || since !== this.#lastProgress) return;
        if (this.#options.shared === true && diagnosis.fingerprint !== this.#fingerprint) {
          // Another process may be doing the work: wait one more period with this lineage.
          this.#fingerprint = diagnosis.fingerprint;
          this.#lastProgress = performance.now();
          return;
        }
        this.#stall = diagnosis;
        this.#options.onStall(diagnosis);
      })
      // A diagnosis that could not be made (a store already closed) is tried again next tick.
      .catch(() => undefined)
      .finally(() => {
        this.#checking = false;
      });
  }
}
