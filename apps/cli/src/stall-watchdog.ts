import { performance } from "node:perf_hooks";
import type { EngineFacade } from "@factflow/runtime";
import { onDrain } from "./drain-guard.js";

/** Why a run is given up: no progress for `--stall-timeout`, or nothing left that could make any. */
export type StallEnd =
  | { readonly reason: "timeout"; readonly quietMs: number }
  | { readonly reason: "drained" };

/**
 * Watches the one execution `factflow run` started. `stalled` resolves when it has made no
 * progress for `timeoutMs` (when given), or when the event loop drains while it runs. Its timer is
 * unref'd, so it never keeps the process alive by itself: a drain is noticed at once.
 */
export class StallWatchdog {
  readonly stalled: Promise<StallEnd>;
  readonly #engine: Pick<EngineFacade, "progress">;
  readonly #timeoutMs: number | undefined;
  #resolve!: (end: StallEnd) => void;
  #timer: NodeJS.Timeout | undefined;
  #undrain: (() => void) | undefined;
  #startedAt = performance.now();

  constructor(engine: Pick<EngineFacade, "progress">, timeoutMs: number | undefined) {
    this.#engine = engine;
    this.#timeoutMs = timeoutMs;
    this.stalled = new Promise((resolve) => {
      this.#resolve = (end) => {
        // Once given up, a later drain (while reporting) is the generic guard's to handle.
        this.#undrain?.();
        resolve(end);
      };
    });
  }

  start(): void {
    this.#startedAt = performance.now();
    this.#undrain = onDrain(() => this.#resolve({ reason: "drained" }));
    const timeoutMs = this.#timeoutMs;
    if (timeoutMs === undefined) return;
    this.#timer = setInterval(
      () => {
        // Before the execution runs here (its row being written), quiet counts from the start.
        const quietMs = this.#engine.progress()[0]?.quietMs ?? performance.now() - this.#startedAt;
        if (quietMs >= timeoutMs) this.#resolve({ reason: "timeout", quietMs });
      },
      Math.min(1000, Math.max(50, timeoutMs / 4)),
    );
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#undrain?.();
  }
}
