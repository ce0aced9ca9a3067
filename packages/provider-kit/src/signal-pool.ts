import { getEventListeners } from "node:events";

/**
 * The abort controllers of one subscription's deliveries. When the subscriber set `releasesSignal`
 * (its handler lets go of its signal once it settles), a settled delivery's controller goes back
 * here and serves a later delivery instead of a new `AbortController`, one of the largest costs of
 * an in-process delivery. The rule every provider follows: only a signal never aborted and with no
 * abort listener left is handed out again, so nothing of the old delivery can react to the new
 * one's abort. Without `releasesSignal`, every delivery gets a controller of its own.
 */
export class SignalPool {
  readonly #spare: AbortController[] = [];
  readonly #enabled: boolean;
  readonly #min: number;
  readonly #unseen: boolean;
  /** Controllers handed out and not given back yet, and the most there were at once. */
  #out = 0;
  #peak = 0;

  /**
   * `min`: controllers kept at least (the subscription's handlers at once). The pool keeps as many
   * as were out at once, up to {@link MAX_SPARE}: a delivery keeps its controller until it settles,
   * after its handler returned, so while deliveries wait for a `settleAfter` (a lineage commit)
   * more are out than handlers run, and a pool sized to the handlers dropped most of them at the
   * end of each commit. `unseen`: the handler never receives the signal (it declares one
   * parameter), so nothing can listen on it.
   */
  constructor(releasesSignal: boolean, min: number, unseen = false) {
    this.#enabled = releasesSignal;
    this.#min = min;
    this.#unseen = unseen;
  }

  /** A controller for a new delivery. */
  take(): AbortController {
    if (++this.#out > this.#peak) this.#peak = this.#out;
    return this.#spare.pop() ?? new AbortController();
  }

  /** Hands back the controller of a delivery whose handler has settled; kept only if reusable. */
  give(controller: AbortController): void {
    if (this.#out > 0) this.#out--;
    if (!this.#enabled) return;
    if (this.#spare.length >= Math.min(Math.max(this.#min, this.#peak), MAX_SPARE)) return;
    const signal = controller.signal;
    if (signal.aborted || (!this.#unseen && getEventListeners(signal, "abort").length > 0)) return;
    this.#spare.push(controller);
  }
}

/** Spare controllers one pool keeps at most, whatever its peak. */
const MAX_SPARE = 4096;
