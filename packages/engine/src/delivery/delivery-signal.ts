import { isDeliveryLost } from "@factflow/protocols";

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
 * unsubscribe) or the execution's does (cancel, fail). A provider abort that only says the delivery
 * went back to the broker (`isDeliveryLost`: its channel closed) cancels nothing: the work runs to
 * its end, so that the ledger records its outcome and the broker's redelivery of the message is a
 * duplicate instead of running the adapters a second time. Only a wait parked on the delivery itself
 * (a batch member) listens for it, through {@link onLost}. Most deliveries never need it as an
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
  /**
   * When a lost delivery's work is cancelled after all (epoch ms): the handler's own deadline, which
   * the provider no longer enforces once it has let the delivery go.
   */
  #deadline: number;
  /** Cancellations deferred because the delivery was lost: run at {@link #deadline}, or by {@link cancelLostNow}. */
  #deferred: { readonly cancel: () => void; readonly timer: NodeJS.Timeout | undefined }[] | undefined;

  constructor(
    provider: AbortSignal,
    execution: AbortSignal,
    registry: Set<Abortable>,
    deadline = Number.POSITIVE_INFINITY,
  ) {
    this.#provider = provider;
    this.#execution = execution;
    this.#registry = registry;
    this.#deadline = deadline;
  }

  get aborted(): boolean {
    if (this.#controller !== undefined) return this.#controller.signal.aborted;
    return this.#disposed ? this.#execution.aborted : this.#providerCancelled() || this.#execution.aborted;
  }

  /** Why it was cancelled: the reason of the source that aborted first (the provider's when both have). */
  get reason(): unknown {
    if (this.#controller !== undefined) return this.#controller.signal.reason;
    if (this.#disposed) return this.#execution.reason;
    return this.#providerCancelled() ? this.#provider.reason : this.#execution.reason;
  }

  /** The provider's signal aborted for another reason than a lost delivery, or lost and past its deadline. */
  #providerCancelled(): boolean {
    const provider = this.#provider;
    return provider.aborted && (!isDeliveryLost(provider.reason) || Date.now() >= this.#deadline);
  }

  /**
   * Runs `cancel` now if the provider's abort cancels the work, or at the delivery's deadline if it
   * only says the delivery was lost.
   */
  #whenProviderCancels(cancel: () => void): void {
    if (!isDeliveryLost(this.#provider.reason) || Date.now() >= this.#deadline) {
      cancel();
      return;
    }
    if (this.#disposed) return;
    let timer: NodeJS.Timeout | undefined;
    if (this.#deadline !== Number.POSITIVE_INFINITY) {
      timer = setTimeout(cancel, this.#deadline - Date.now());
      // A lost delivery's leftover work does not keep the process alive.
      timer.unref();
    }
    this.#deferred ??= [];
    this.#deferred.push({ cancel, timer });
  }

  /** True while the provider says the delivery went back to the broker and its work still runs. */
  get isLost(): boolean {
    return !this.#disposed && this.#provider.aborted && isDeliveryLost(this.#provider.reason);
  }

  /**
   * Cancels a lost delivery's work now instead of at its deadline: the broker's redelivery of the
   * message is here and waits for it (it carries the message on now).
   */
  cancelLostNow(): void {
    this.#deadline = Number.NEGATIVE_INFINITY;
    const deferred = this.#deferred;
    this.#deferred = undefined;
    for (const { cancel, timer } of deferred ?? []) {
      clearTimeout(timer);
      cancel();
    }
  }

  /**
   * Runs `listener` once if the provider says the delivery went back to the broker (at once if it
   * already has). Returns the function that removes it.
   */
  onLost(listener: () => void): () => void {
    const provider = this.#provider;
    if (this.#disposed) return () => {};
    if (provider.aborted) {
      if (isDeliveryLost(provider.reason)) listener();
      return () => {};
    }
    const onAbort = () => {
      if (isDeliveryLost(provider.reason)) listener();
    };
    provider.addEventListener("abort", onAbort, { once: true });
    return () => provider.removeEventListener("abort", onAbort);
  }

  /** The delivery's `AbortSignal`, made on first use; it aborts with either source. */
  get signal(): AbortSignal {
    if (this.#controller !== undefined) return this.#controller.signal;
    // Read after the delivery ended (an adapter's background work): the execution's own signal.
    if (this.#disposed) return this.#execution;
    const controller = new AbortController();
    this.#controller = controller;
    const provider = this.#provider;
    if (this.#providerCancelled() || this.#execution.aborted) {
      controller.abort(this.#providerCancelled() ? provider.reason : this.#execution.reason);
      return controller.signal;
    }
    const cancel = () => this.#whenProviderCancels(() => controller.abort(provider.reason));
    if (provider.aborted) {
      // Lost already: cancelled at its deadline, or by the execution.
      cancel();
      this.#registry.add(controller);
      return controller.signal;
    }
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
        this.#onProviderAbort = () => this.#whenProviderCancels(() => this.abort());
        // Lost already: the listener is cancelled at the deadline (a cancelled delivery never waits).
        if (this.#provider.aborted) setImmediate(this.#onProviderAbort);
        else this.#provider.addEventListener("abort", this.#onProviderAbort, { once: true });
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
    for (const { timer } of this.#deferred ?? []) clearTimeout(timer);
    this.#deferred = undefined;
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
