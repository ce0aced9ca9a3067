import { Deque } from "./deque.js";
import type { StoredMessage } from "./message.js";

/** Where the messages of one physical queue wait to be handed to a consumer. */
export interface ReadySet {
  readonly size: number;
  /** Appends a message (at the back of its priority or lane). */
  add(message: StoredMessage): void;
  /** Puts a message back at the front (an aborted delivery, or a FIFO retry keeping its place). */
  addFront(message: StoredMessage): void;
  /** Takes the next deliverable message, or undefined. */
  next(now: number): StoredMessage | undefined;
  /** A taken message was settled or returned: its lane may deliver again. */
  release(message: StoredMessage): void;
  /** Every waiting message, in no particular order. */
  values(): Iterable<StoredMessage>;
}

/**
 * Unordered competing consumption. Without priorities one deque; with priorities one deque per level
 * 0–9 and the highest non-empty level first. Delayed messages never sit here: the scheduler holds them
 * until due.
 */
export class StandardReadySet implements ReadySet {
  readonly #levels: Deque<StoredMessage>[];
  #size = 0;

  constructor(prioritised: boolean) {
    this.#levels = Array.from({ length: prioritised ? 10 : 1 }, () => new Deque<StoredMessage>());
  }

  get size(): number {
    return this.#size;
  }

  #level(message: StoredMessage): Deque<StoredMessage> {
    const levels = this.#levels;
    return (levels.length === 1 ? levels[0] : levels[message.priority ?? 0]) as Deque<StoredMessage>;
  }

  add(message: StoredMessage): void {
    this.#level(message).push(message);
    this.#size++;
  }

  addFront(message: StoredMessage): void {
    this.#level(message).unshift(message);
    this.#size++;
  }

  next(): StoredMessage | undefined {
    if (this.#size === 0) return undefined;
    for (let i = this.#levels.length - 1; i >= 0; i--) {
      const level = this.#levels[i] as Deque<StoredMessage>;
      if (level.size > 0) {
        this.#size--;
        return level.shift();
      }
    }
    return undefined;
  }

  release(): void {}

  *values(): Iterable<StoredMessage> {
    for (const level of this.#levels) yield* level;
  }
}

/**
 * FIFO lanes. Each lane delivers one message at a time, strictly in order; different lanes run
 * concurrently (as far as the consumers' slots allow). Plain `fifo` is the single lane "". A message
 * that is not yet due (a delayed publish, a retry waiting for its backoff) blocks its lane until then,
 * which is what keeps a retried message ahead of the ones published after it.
 */
export class LaneReadySet implements ReadySet {
  readonly #lanes = new Map<string, Deque<StoredMessage>>();
  readonly #busy = new Set<string>();
  readonly #runnable = new Deque<string>();
  readonly #listed = new Set<string>();
  readonly #waiting = new Set<string>();
  #size = 0;

  constructor(
    readonly laneOf: (message: StoredMessage) => string,
    /** Asks for `wake(lane)` to be called at `due`. */
    readonly wakeAt: (due: number, wake: () => void) => void,
    readonly onWake: () => void,
  ) {}

  get size(): number {
    return this.#size;
  }

  #lane(message: StoredMessage): [string, Deque<StoredMessage>] {
    message.lane ??= this.laneOf(message);
    let lane = this.#lanes.get(message.lane);
    if (lane === undefined) {
      lane = new Deque<StoredMessage>();
      this.#lanes.set(message.lane, lane);
    }
    return [message.lane, lane];
  }

  #list(key: string, front: boolean): void {
    if (this.#busy.has(key) || this.#listed.has(key) || this.#waiting.has(key)) return;
    this.#listed.add(key);
    if (front) this.#runnable.unshift(key);
    else this.#runnable.push(key);
  }

  add(message: StoredMessage): void {
    const [key, lane] = this.#lane(message);
    lane.push(message);
    this.#size++;
    this.#list(key, false);
  }

  addFront(message: StoredMessage): void {
    const [key, lane] = this.#lane(message);
    lane.unshift(message);
    this.#size++;
    this.#list(key, true);
  }

  next(now: number): StoredMessage | undefined {
    for (;;) {
      const key = this.#runnable.shift();
      if (key === undefined) return undefined;
      this.#listed.delete(key);
      const lane = this.#lanes.get(key);
      const head = lane?.peek();
      if (lane === undefined || head === undefined) {
        this.#lanes.delete(key);
        continue;
      }
      if (head.notBefore > now) {
        this.#waiting.add(key);
        this.wakeAt(head.notBefore, () => {
          this.#waiting.delete(key);
          this.#list(key, true);
          this.onWake();
        });
        continue;
      }
      lane.shift();
      this.#size--;
      this.#busy.add(key);
      return head;
    }
  }

  release(message: StoredMessage): void {
    const key = message.lane ?? "";
    if (!this.#busy.delete(key)) return;
    const lane = this.#lanes.get(key);
    if (lane === undefined || lane.size === 0) {
      this.#lanes.delete(key);
      return;
    }
    this.#list(key, false);
  }

  *values(): Iterable<StoredMessage> {
    for (const lane of this.#lanes.values()) yield* lane;
  }
}
