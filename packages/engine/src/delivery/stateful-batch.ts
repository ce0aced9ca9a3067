import type { AdapterResult, LineageErrorInfo, MessageStatus } from "@factflow/protocols";
import { Semaphore } from "./semaphore.js";

/** What a delivery parked in a batch learns when the batch is emitted (or given up). */
export type BatchFate =
  | {
      /** This delivery carries the emitted batch through the rest of the chain and its publish. */
      readonly kind: "lead";
      readonly result: AdapterResult;
      /** The other deliveries of the batch; they settle the way the leader does. */
      readonly followers: HeldDelivery[];
    }
  | { readonly kind: "settle"; readonly status: MessageStatus; readonly error?: LineageErrorInfo };

/** A delivery whose message sits in a stateful adapter's batch, unsettled. */
export interface HeldDelivery {
  /** The adapter lineage row of the invocation that added it to the batch. */
  readonly rowId: string;
  /** The id of the held message: a batch's output ids derive from its members' ids. */
  readonly messageId: string;
  resolve(fate: BatchFate): void;
}

/**
 * The deliveries held by one stateful adapter of one route. Every message in an unemitted batch stays
 * unsettled on the broker; if the process dies, the broker redelivers them and the batch is rebuilt.
 * `mutex` serialises `process` and `flush` so a batch is handed out exactly once.
 */
export class BatchState {
  readonly mutex = new Semaphore(1);
  #held: HeldDelivery[] = [];
  timer: NodeJS.Timeout | undefined;

  get size(): number {
    return this.#held.length;
  }

  hold(rowId: string, messageId: string): { entry: HeldDelivery; fate: Promise<BatchFate> } {
    let resolve!: (fate: BatchFate) => void;
    const fate = new Promise<BatchFate>((r) => {
      resolve = r;
    });
    const entry: HeldDelivery = { rowId, messageId, resolve };
    this.#held.push(entry);
    return { entry, fate };
  }

  /** Removes every held delivery and returns them, oldest first. */
  take(): HeldDelivery[] {
    const held = this.#held;
    this.#held = [];
    return held;
  }

  /**
   * Forgets one delivery (its handler was aborted; the broker redelivers it). False when the batch
   * no longer holds it: it was taken into an emitted batch.
   */
  remove(entry: HeldDelivery): boolean {
    const index = this.#held.indexOf(entry);
    if (index === -1) return false;
    this.#held.splice(index, 1);
    return true;
  }
}
