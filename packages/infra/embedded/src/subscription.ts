import type { Destination, MessageHandler, ProviderError } from "@factflow/protocols";
import {
  type DecodedDelivery,
  type ResolvedSubscribeOptions,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
} from "@factflow/provider-kit";
import type { Broker } from "./broker.js";
import { classifyError } from "./classify-error.js";
import { PROVIDER_NAME } from "./errors.js";
import { type StoredMessage, toEnvelope } from "./message.js";
import type { PhysicalQueue } from "./physical-queue.js";

/** Deliveries of one subscription waiting for their `settleAfter` at once, at most. */
const MAX_SETTLING = 4096;

/** Settled at once: a retry or dead letter is kept in place, in the same step as the original. */
const SETTLED = Promise.resolve("settled" as const);

/**
 * One `subscribe` call attached to a physical queue: the embedded port of the kit's
 * `SubscriptionRuntime`, which runs the handlers and decides and reports settlements. The broker
 * hands this port a message when it has a free slot ({@link hasCapacity}); every settlement is a
 * change of the broker's memory made at once (no I/O on the path: the file mode's journal
 * group-commits it later). A retry or dead letter is the stored message itself, moved in place
 * (`settled`), not a copy.
 */
export class EmbeddedSubscription implements SubscriptionPort<StoredMessage> {
  readonly runtime: SubscriptionRuntime<StoredMessage>;
  /** Handlers at once: `min(prefetch, concurrency)`, since an in-process broker buffers nothing. */
  readonly slots: number;
  #deliver: ((message: StoredMessage, redelivered: boolean) => void) | undefined;
  #receiving = false;

  constructor(
    readonly broker: Broker,
    readonly queue: PhysicalQueue,
    destination: Destination,
    handler: MessageHandler,
    options: ResolvedSubscribeOptions,
    slots: number,
    onStop: () => void,
  ) {
    this.slots = slots;
    this.runtime = new SubscriptionRuntime({
      provider: PROVIDER_NAME,
      destination,
      handler,
      // The queue's ready set keeps FIFO lanes in order itself (one message of a lane out at a
      // time), so the runtime runs up to `slots` handlers whatever the ordering.
      options: { ...options, ordering: "none", prefetch: slots, concurrency: slots },
      port: this,
      counters: broker.counters,
      logger: broker.logger,
      onStop,
      // Every settlement here completes within the microtasks of the stop; what is left is a
      // delivery awaiting its `settleAfter`, which the broker still holds and settles once it
      // resolves, so the stop does not wait for it.
      shutdownStepMs: 0,
    });
  }

  /**
   * A free handler slot. Deliveries whose handler returned and that wait only for their
   * `settleAfter` (a lineage commit) hold no slot and do not count against the prefetch: in this
   * process they cost a little memory, while counting them would bound a route's rate by its
   * prefetch over the commit's latency. At most {@link MAX_SETTLING} of them wait at once.
   */
  get hasCapacity(): boolean {
    if (!this.#receiving) return false;
    const runtime = this.runtime;
    const busy = runtime.running + runtime.waiting;
    return busy < this.slots && runtime.unsettled - busy < MAX_SETTLING;
  }

  /** Hands a message taken from the queue to the runtime (the broker checked {@link hasCapacity}). */
  take(message: StoredMessage): void {
    this.queue.inFlight++;
    // Redeliveries are counted where the broker hands a message back (see handBack), and an
    // incomplete attempt's retry by the settlement report: the handler's flag comes from `decode`.
    (this.#deliver as (message: StoredMessage, redelivered: boolean) => void)(message, false);
  }

  receive(deliver: (message: StoredMessage, redelivered: boolean) => void): Promise<void> {
    this.#deliver = deliver;
    this.#receiving = true;
    this.broker.pump(this.queue);
    return Promise.resolve();
  }

  stopReceiving(): Promise<void> {
    this.#receiving = false;
    return Promise.resolve();
  }

  decode(message: StoredMessage): DecodedDelivery {
    return { envelope: toEnvelope(message), attempt: message.attempt, redelivered: message.redelivered };
  }

  /** Once the provider closed, the journal is closed too: nothing is settled any more. */
  isCurrent(): boolean {
    return !this.broker.closed;
  }

  ack(message: StoredMessage): boolean {
    this.broker.ack(this.queue, message);
    return true;
  }

  /** Back to the front of its queue, no attempt consumed; counted `redelivered` here. */
  handBack(message: StoredMessage): boolean {
    this.broker.handBack(this.queue, message);
    return true;
  }

  publishCopy(message: StoredMessage, copy: SettlementCopy): Promise<"settled"> {
    const { verdict } = copy;
    if (verdict.kind === "retry") this.broker.retry(this.queue, message, verdict);
    else this.broker.deadLetter(this.queue, message, verdict.reason, verdict.lastError);
    return SETTLED;
  }

  classifyError(error: unknown, operation: string): ProviderError {
    return classifyError(error, operation);
  }

  /**
   * The delivery is done with. A settlement may have let another message out (a FIFO lane
   * released, a message handed back): when the handler slot was freed before (the delivery awaited
   * its `settleAfter`), or not all slots are busy, look for work now; otherwise
   * {@link handlerFreed} does, right after.
   */
  release(): void {
    this.queue.inFlight--;
    const runtime = this.runtime;
    const busy = runtime.running + runtime.waiting;
    if (busy < this.slots || runtime.unsettled - busy === MAX_SETTLING - 1) this.broker.pump(this.queue);
  }

  handlerFreed(): void {
    this.broker.pump(this.queue);
  }
}
