import type { Destination, MessageHandler, RetryPolicy } from "@factflow/protocols";
import { type SettlementReport, SignalPool } from "@factflow/provider-kit";
import type { StoredMessage } from "./message.js";
import type { PhysicalQueue } from "./physical-queue.js";

/** One delivery being handled. `done` flips once: by the handler's return, a timeout or an abort. */
export interface ActiveDelivery {
  readonly message: StoredMessage;
  readonly consumer: Consumer;
  readonly controller: AbortController;
  /** Epoch ms the handler started, for the timeout sweep. */
  readonly startedAt: number;
  done: boolean;
  /** The handler returned in time and the broker awaits its `settleAfter`: no timeout applies. */
  returned?: boolean;
}

/** One `subscribe` call attached to a physical queue. */
export class Consumer {
  readonly active = new Set<ActiveDelivery>();
  /** Of `active`, the deliveries whose handler returned and whose `settleAfter` is awaited. */
  settling = 0;
  closed = false;
  /**
   * One sweep timer per consumer enforces the handler timeout, instead of a timer per delivery: at
   * high rates the per-delivery timers cost more than the broker itself. A handler is aborted between
   * `handlerTimeoutMs` and `handlerTimeoutMs` + one sweep period after it started.
   */
  sweep: NodeJS.Timeout | undefined;
  /**
   * The signal of handlers declared with exactly one parameter: they cannot read the signal, and an
   * AbortController per delivery is the largest single cost of the in-process hot path. It fires on
   * unsubscribe and close like the per-delivery ones; a timeout still redelivers the message.
   */
  readonly shared: AbortController | undefined;
  /** The per-delivery controllers of handlers that declare the signal (see the kit's SignalPool). */
  readonly signals: SignalPool;

  constructor(
    readonly queue: PhysicalQueue,
    readonly destination: Destination,
    readonly subscription: string,
    readonly handler: MessageHandler,
    /** Handlers at once: `min(prefetch, concurrency)`, since an in-process broker buffers nothing. */
    readonly slots: number,
    readonly retry: RetryPolicy,
    readonly handlerTimeoutMs: number,
    /** Counts each settled delivery and tells the subscriber's `onSettled`. */
    readonly report: SettlementReport,
    releasesSignal = false,
  ) {
    this.shared = handler.length === 1 ? new AbortController() : undefined;
    this.signals = new SignalPool(releasesSignal && this.shared === undefined, slots);
  }

  /** Sweep period: a quarter of the timeout, between 5 ms and 1 s. */
  get sweepPeriodMs(): number {
    return Math.min(1_000, Math.max(5, Math.floor(this.handlerTimeoutMs / 4)));
  }

  /**
   * A free handler slot. Deliveries whose handler returned and that wait only for their
   * `settleAfter` (a lineage commit) hold no slot and do not count against the prefetch: in this
   * process they cost a little memory, while counting them would bound a route's rate by its
   * prefetch over the commit's latency. At most {@link MAX_SETTLING} of them wait at once.
   */
  get hasCapacity(): boolean {
    return !this.closed && this.active.size - this.settling < this.slots && this.settling < MAX_SETTLING;
  }
}

/** Deliveries of one subscription waiting for their `settleAfter` at once, at most. */
const MAX_SETTLING = 4096;
