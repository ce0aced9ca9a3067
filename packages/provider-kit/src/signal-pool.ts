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
  readonly #max: number;
  readonly #unseen: boolean;

  /**
   * `max`: controllers kept at most (the subscription's handlers at once is enough). `unseen`: the
   * handler never receives the signal (it declares one parameter), so nothing can listen on it.
   */
  constructor(releasesSignal: boolean, max: number, unseen = false) {
    this.#enabled = releasesSignal;
    this.#max = max;
    this.#unseen = unseen;
  }

  /** A controller for a new delivery. */
  take(): AbortController {
    return this.#spare.pop() ?? new AbortController();
  }

  /** Hands back the controller of a delivery whose handler has settled; kept only if reusable. */
  give(controller: AbortController): void {
    if (!this.#enabled || this.#spare.length >= this.#max) return;
    const signal = controller.signal;
    if (signal.aborted || (!this.#unseen && getEventListeners(signal, "abort").length > 0)) return;
    this.#spare.push(controller);
  }
}
