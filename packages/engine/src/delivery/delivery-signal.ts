/** What aborts with an execution: a delivery's controller, or one {@link DeliverySignal.onCancel} listener. */
export interface Abortable {
  abort(reason?: unknown): void;
}

/**
 * Something a wait can be cut short by, without an `AbortSignal` of its own: the engine's waits
 * (slots, batches, an adapter's promise) take either this or an `AbortSignal`.
 */
export interface Cancellation {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** Calls `listener` once when cancelled (not if already cancelled); the returned function removes it. */
  onCancel(listener: () => void): () => void;
}

/**
 * The cancellation of one delivery: it is cancelled when the provider's signal aborts (timeout,
 * unsubscribe) or the execution's does (cancel, fail). Most deliveries never need it as an
 * `AbortSignal` (a synchronous adapter never waits, the slots are usually free), and an
 * `AbortController` plus a listener on the provider's signal for every delivery would be one of the
 * largest costs of the hot path, so the controller is made only when something asks for {@link signal}.
 * Until then {@link aborted} and {@link reason} read the two sources directly.
 */
export class DeliverySignal implements Cancellation, Abortable {
  readonly #provider: AbortSignal;
  readonly #execution: AbortSignal;
  /** Controllers and listeners of the route's deliveries, aborted by the route when the execution's signal aborts. */
  readonly #registry: Set<Abortable>;
  #controller: AbortController | undefined;
  #cancel: (() => void) | undefined;
  /** {@link onCancel} listeners waiting; set while this is watching (provider listener, registry entry). */
  #listeners: (() => void)[] | undefined;
  #onProviderAbort: (() => void) | undefined;
  /**
   * Set by {@link dispose}. The provider may then hand its signal to another delivery (the engine
   * subscribes with `releasesSignal`), so nothing here reads it any more: only the execution can
   * still cancel what an adapter left running.
   */
  #disposed = false;

  constructor(provider: AbortSignal, execution: AbortSignal, registry: Set<Abortable>) {
    this.#provider = provider;
    this.#execution = execution;
    this.#registry = registry;
  }

  get aborted(): boolean {
    if (this.#controller !== undefined) return this.#controller.signal.aborted;
    return this.#disposed ? this.#execution.aborted : this.#provider.aborted || this.#execution.aborted;
  }

  /** Why it was cancelled: the reason of the source that aborted first (the provider's when both have). */
  get reason(): unknown {
    if (this.#controller !== undefined) return this.#controller.signal.reason;
    if (this.#disposed) return this.#execution.reason;
    return this.#provider.aborted ? this.#provider.reason : this.#execution.reason;
  }

  /** The delivery's `AbortSignal`, made on first use; it aborts with either source. */
  get signal(): AbortSignal {
    if (this.#controller !== undefined) return this.#controller.signal;
    // Read after the delivery ended (an adapter's background work): the execution's own signal.
    if (this.#disposed) return this.#execution;
    const controller = new AbortController();
    this.#controller = controller;
    const provider = this.#provider;
    if (provider.aborted || this.#execution.aborted) {
      controller.abort(provider.aborted ? provider.reason : this.#execution.reason);
      return controller.signal;
    }
    const cancel = () => controller.abort(provider.reason);
    this.#cancel = cancel;
    provider.addEventListener("abort", cancel, { once: true });
    // The execution's signal reaches this controller through the registry (one listener per route).
    this.#registry.add(controller);
    return controller.signal;
  }

  /**
   * Runs `listener` once if the delivery is cancelled, without making the `AbortSignal` (a wait for
   * a slot, a batch or an adapter's promise needs only this). Returns the function that removes it.
   * However many waits a delivery goes through, it puts one listener on the provider's signal and
   * one entry in the route's registry, the first time one waits, both removed by {@link dispose}.
   */
  onCancel(listener: () => void): () => void {
    const controller = this.#controller;
    if (controller !== undefined) {
      const signal = controller.signal;
      signal.addEventListener("abort", listener, { once: true });
      return () => signal.removeEventListener("abort", listener);
    }
    let listeners = this.#listeners;
    if (listeners === undefined) {
      listeners = [];
      this.#listeners = listeners;
      // After the delivery ended only the execution can cancel (see #disposed): the registry
      // carries the execution's abort, the provider's signal its own.
      if (!this.#disposed) {
        this.#onProviderAbort = () => this.abort();
        this.#provider.addEventListener("abort", this.#onProviderAbort, { once: true });
      }
      this.#registry.add(this);
    }
    listeners.push(listener);
    return () => this.#unwatch(listener);
  }

  /**
   * Runs every {@link onCancel} listener still waiting, once (the route's registry calls this when
   * the execution's signal aborts; the provider's signal when it does).
   */
  abort(): void {
    const listeners = this.#listeners;
    if (listeners === undefined || listeners.length === 0) return;
    this.#listeners = [];
    for (const listener of listeners) listener();
  }

  #unwatch(listener: () => void): void {
    const listeners = this.#listeners;
    if (listeners === undefined) return;
    const index = listeners.indexOf(listener);
    if (index >= 0) listeners.splice(index, 1);
    // A wait that outlived the delivery was the last to keep its registry entry.
    if (this.#disposed && listeners.length === 0) this.#stopWatching();
  }

  /** Detaches from the provider's signal and the registry once the delivery is over. */
  dispose(): void {
    this.#disposed = true;
    if (this.#listeners !== undefined) {
      // The provider may hand its signal to another delivery now: nothing of this one stays on it.
      // A wait still running (an adapter's background promise) keeps the registry entry until it
      // ends, so the execution can still cancel it.
      if (this.#onProviderAbort !== undefined)
        this.#provider.removeEventListener("abort", this.#onProviderAbort);
      this.#onProviderAbort = undefined;
      if (this.#listeners.length === 0) this.#stopWatching();
    }
    const controller = this.#controller;
    if (controller === undefined) return;
    if (this.#cancel !== undefined) this.#provider.removeEventListener("abort", this.#cancel);
    this.#registry.delete(controller);
  }

  #stopWatching(): void {
    this.#listeners = undefined;
    this.#registry.delete(this);
  }
}
