/** Settled message ids a ledger remembers by default (a few MB per busy execution at most). */
export const DEFAULT_SETTLED_MEMORY = 50_000;

/** A handler of one id in flight; `done`/`end` exist once another copy waits for it. */
interface Running {
  done?: Promise<void> | undefined;
  end?: (() => void) | undefined;
}

/** How a message's delivery ended for good in this process. */
export interface SettledDelivery {
  /** `completed`: acknowledged; `failed`: rejected or dead-lettered after its last attempt. */
  readonly outcome: "completed" | "failed";
  /** The attempt that settled it. */
  readonly attempt: number;
}

/** The record of a claim nobody waits for, shared (never mutated: a waiter replaces it first). */
const CLAIMED: Running = Object.freeze({});

function unpack(packed: number): SettledDelivery {
  return { outcome: packed % 2 === 1 ? "failed" : "completed", attempt: Math.floor(packed / 2) };
}

/** The running handler of a claim, as far as a second copy waiting for it needs to know. */
export interface ClaimHolder {
  /** Its delivery went back to the broker (its channel closed) while it still runs. */
  readonly isLost: boolean;
  /** Stops its work now: the broker's redelivery of the message carries it on. */
  cancelLostNow(): void;
}

/** How a {@link DeliveryLedger.claim} ended. */
export type Claim = "claimed" | "aborted" | "covered";

/** What {@link DeliveryLedger.classify} decides for an arriving delivery. */
export type DeliveryVerdict = "fresh" | "duplicate";

/**
 * Remembers, per execution and in this process, which message ids are being handled and which were
 * settled for good, so a broker redelivery (ack lost to a connection cut, a duplicate publish of a
 * re-run parent) is acknowledged without running the adapters again.
 *
 * Bounded: the oldest settled ids are forgotten past `capacity`. It sees only this process, so a
 * redelivery that lands on ANOTHER process (or after a restart) is re-run; deterministic child ids
 * keep that re-run's fan-out on the same lineage rows and messages.
 */
export class DeliveryLedger {
  readonly #capacity: number;
  /**
   * Settled ids, each with its attempt and outcome packed in one number (`attempt * 2`, +1 when
   * failed): tens of thousands are kept, and a number per entry is no object for the garbage
   * collector to trace.
   */
  readonly #settled = new Map<string, number>();
  /**
   * The settled ids in the order they were settled: filled up to `capacity`, then a ring whose
   * oldest place (`#next`) is reused by each new id.
   */
  readonly #order: string[] = [];
  #next = 0;
  /**
   * Ids with a handler running. The promise that resolves when it ends is only made when a second
   * copy of the message has to wait for it (rare), so the common claim allocates nothing.
   */
  readonly #running = new Map<string, Running>();
  /**
   * Ids whose running handler is parked in a stateful batch, with the attempt it carries. The batch
   * settles that message, so a copy of it at that attempt or an earlier one has nothing to add; and a
   * copy that waited for the parked one would hold a handler slot the batch may need to fill.
   */
  readonly #parked = new Map<string, number>();
  /** The handler holding each claim, once it runs (see {@link holdBy}). */
  readonly #holders = new Map<string, ClaimHolder>();
  /** Deliveries acknowledged as duplicates. */
  duplicates = 0;

  constructor(capacity = DEFAULT_SETTLED_MEMORY) {
    this.#capacity = Math.max(1, capacity);
  }

  /** How the id was settled for good in this process, if it was (and is still remembered). */
  settled(id: string): SettledDelivery | undefined {
    const packed = this.#settled.get(id);
    return packed === undefined ? undefined : unpack(packed);
  }

  /** True when the id was settled for good in this process (and is still remembered). */
  isSettled(id: string): boolean {
    return this.#settled.has(id);
  }

  /** True while a handler of this id runs in this process. */
  isRunning(id: string): boolean {
    return this.#running.has(id);
  }

  /**
   * Whether a delivery must run or is a duplicate. A completed message is always a duplicate. A
   * failed one only when the broker marks it redelivered or its attempt did not move back: an
   * operator's redrive of a dead letter comes back at attempt 1, not redelivered, and must run.
   */
  classify(id: string, attempt: number, redelivered: boolean): DeliveryVerdict {
    const packed = this.#settled.get(id);
    if (packed === undefined) return "fresh";
    const prior = unpack(packed);
    if (prior.outcome === "completed") return "duplicate";
    return redelivered || (attempt > 1 && attempt >= prior.attempt) ? "duplicate" : "fresh";
  }

  /**
   * Waits until no handler of `id` runs, then claims it: "claimed". "aborted" when one of `signals`
   * aborts first; with `coveredAt`, "covered" when the handler it waits for is parked in a batch at
   * that attempt or a later one (no claim is taken either way). Two copies of one message never run
   * at once in this process: the second waits for the first to settle, then is classified. A holder
   * whose delivery was lost is stopped as soon as a copy waits for it: that copy carries the message.
   */
  async claim(id: string, signals: readonly AbortSignal[], coveredAt?: number): Promise<Claim> {
    if (this.tryClaim(id, signals)) return "claimed";
    for (;;) {
      if (signals.some((s) => s.aborted)) return "aborted";
      let current = this.#running.get(id);
      if (current === undefined) break;
      if (coveredAt !== undefined && this.isCovered(id, coveredAt)) return "covered";
      // The holder's delivery was lost and this is the message handed out again: it takes over.
      const holder = this.#holders.get(id);
      if (holder?.isLost === true) holder.cancelLostNow();
      if (current === CLAIMED) {
        // The shared marker of an uncontended claim: give this one its own record to wait on.
        current = {};
        this.#running.set(id, current);
      }
      const running = current;
      // Rare (two copies of one message at once): plain listeners, removed on either outcome.
      const aborted = await new Promise<boolean>((resolve) => {
        const finish = (value: boolean) => {
          for (const s of signals) s.removeEventListener("abort", onAbort);
          resolve(value);
        };
        const onAbort = () => finish(true);
        for (const s of signals) s.addEventListener("abort", onAbort, { once: true });
        running.done ??= new Promise<void>((resolve) => {
          running.end = resolve;
        });
        void running.done.then(() => finish(false));
      });
      if (aborted) return "aborted";
    }
    this.#running.set(id, CLAIMED);
    return "claimed";
  }

  /**
   * True while a handler of `id` is parked in a batch at `attempt` or a later one: a copy of the
   * message at `attempt` is settled by that batch (see {@link park}).
   */
  isCovered(id: string, attempt: number): boolean {
    const parked = this.#parked.get(id);
    return parked !== undefined && attempt <= parked;
  }

  /**
   * The claimed handler of `id` parks in a stateful batch, carrying `attempt`: copies waiting for it
   * are woken to find themselves covered ({@link claim} answers "covered").
   */
  park(id: string, attempt: number): void {
    this.#parked.set(id, attempt);
    const current = this.#running.get(id);
    if (current === undefined || current === CLAIMED) return;
    const wake = current.end;
    current.done = undefined;
    current.end = undefined;
    wake?.();
  }

  /** The parked handler of `id` left its batch (it carries the batch on, or settles). */
  unpark(id: string): void {
    this.#parked.delete(id);
  }

  /**
   * Claims `id` at once when no handler of it runs and no signal has aborted; false otherwise (then
   * {@link claim} waits). The synchronous fast path of every delivery.
   */
  tryClaim(id: string, signals: readonly AbortSignal[]): boolean {
    if (this.#running.has(id)) return false;
    for (const s of signals) if (s.aborted) return false;
    this.#running.set(id, CLAIMED);
    return true;
  }

  /** Names the handler that holds the claim of `id` (a waiting copy may need to stop it). */
  holdBy(id: string, holder: ClaimHolder): void {
    this.#holders.set(id, holder);
  }

  /** Ends a {@link claim}. */
  release(id: string): void {
    const current = this.#running.get(id);
    this.#running.delete(id);
    this.#parked.delete(id);
    this.#holders.delete(id);
    current?.end?.();
  }

  /** Records a final settlement (call before the delivery is acknowledged). */
  settle(id: string, outcome: SettledDelivery["outcome"], attempt: number): void {
    const settled = this.#settled;
    const size = settled.size;
    // An id settled again (rare: admission reopens a failure it re-runs) keeps its place in the order.
    settled.set(id, attempt * 2 + (outcome === "failed" ? 1 : 0));
    if (settled.size === size) return;
    // A new id takes the oldest one's place in the ring, which forgets that one. (An id reopened and
    // settled again holds two places; the older one forgets it early, which only shortens its memory.)
    const order = this.#order;
    if (order.length < this.#capacity) {
      order.push(id);
      return;
    }
    const slot = this.#next;
    settled.delete(order[slot] as string);
    order[slot] = id;
    this.#next = slot + 1 === order.length ? 0 : slot + 1;
  }

  /** Forgets a failed settlement that a redrive is now re-running. */
  reopen(id: string): void {
    this.#settled.delete(id);
  }
}
