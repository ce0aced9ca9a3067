import type { Destination } from "@factflow/protocols";
import { emptyReadAhead, type ReadAhead } from "./journal.js";
import { laneOf, type StoredMessage } from "./message.js";
import { DEFAULT_LAYOUT, type QueueDefinition, type QueueLayout } from "./queue-options.js";
import { LaneReadySet, type ReadySet, StandardReadySet } from "./ready-set.js";
import type { Scheduler } from "./scheduler.js";
import type { EmbeddedSubscription } from "./subscription.js";

/**
 * Every place messages wait: one per `/queue/<name>`, one per durable subscription of a topic. It
 * owns the ready set, the count of scheduled and in-flight messages, its dead letters and consumers.
 */
export class PhysicalQueue {
  layout: QueueLayout = DEFAULT_LAYOUT;
  /** Set by `defineQueue`; defaults for subscriptions that leave a field out. */
  definition: QueueDefinition | undefined;
  ready: ReadySet;
  /** Messages held by the scheduler (standard layout only; lanes keep theirs in place). */
  scheduled = 0;
  inFlight = 0;
  /** Dead letters by sequence number, in the order they died. */
  readonly dead = new Map<number, StoredMessage>();
  consumers: EmbeddedSubscription[] = [];
  /** Round-robin cursor over consumers. */
  cursor = 0;
  pumping = false;
  pumpAgain = false;
  /** A pump is scheduled for the next turn of the event loop (see `Broker.pump`). */
  pumpDeferred = false;
  /** The log this queue last read paged-out messages from (file mode). */
  readAhead: ReadAhead = emptyReadAhead();

  constructor(
    readonly key: string,
    readonly destination: Destination,
    readonly subscription: string | undefined,
    private readonly scheduler: Scheduler,
    private readonly pump: (queue: PhysicalQueue) => void,
    /** Reads a paged-out message's content back (its FIFO lane may depend on body or headers). */
    private readonly pageIn: (queue: PhysicalQueue, message: StoredMessage) => void,
  ) {
    this.ready = this.#makeReady();
  }

  get isTopicSubscription(): boolean {
    return this.subscription !== undefined;
  }

  /** Waiting messages: ready plus scheduled (not in flight, not dead). */
  get depth(): number {
    return this.ready.size + this.scheduled;
  }

  #makeReady(): ReadySet {
    const { ordering, groupBy, groupByHeader, maxPriority } = this.layout;
    if (ordering === "fifo") {
      const key = {
        ...(groupBy === undefined ? {} : { groupBy }),
        ...(groupByHeader === undefined ? {} : { groupByHeader }),
      };
      return new LaneReadySet(
        (message) => {
          if (!message.resident) this.pageIn(this, message);
          return laneOf(message, key);
        },
        (due, wake) => this.scheduler.at(due, wake),
        () => this.pump(this),
      );
    }
    return new StandardReadySet(maxPriority !== undefined);
  }

  /** Changes the layout, re-sorting waiting messages into the new ready set in publish order. */
  relayout(layout: QueueLayout): void {
    this.layout = layout;
    const waiting = [...this.ready.values()].sort((a, b) => a.seq - b.seq);
    this.ready = this.#makeReady();
    const now = Date.now();
    for (const message of waiting) {
      message.lane = undefined;
      this.enqueue(message, now);
    }
  }

  /** Makes a message available (now or when due). */
  enqueue(message: StoredMessage, now: number): void {
    if (message.notBefore > now && !(this.ready instanceof LaneReadySet)) {
      this.#schedule(message);
      return;
    }
    this.ready.add(message);
  }

  /** Returns a taken message to the front of the line (an aborted delivery, a FIFO retry). */
  returnToFront(message: StoredMessage, now: number): void {
    const ready = this.ready;
    if (ready instanceof LaneReadySet) {
      ready.addFront(message);
      ready.release(message);
    } else if (message.notBefore > now) {
      this.#schedule(message);
    } else {
      ready.addFront(message);
    }
  }

  /** A taken message was settled for good (acked, dead-lettered). */
  release(message: StoredMessage): void {
    this.ready.release(message);
  }

  #schedule(message: StoredMessage): void {
    this.scheduled++;
    this.scheduler.at(message.notBefore, () => {
      this.scheduled--;
      if (message.dead !== undefined) return;
      this.ready.add(message);
      this.pump(this);
    });
  }
}
