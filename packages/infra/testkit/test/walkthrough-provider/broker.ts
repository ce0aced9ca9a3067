/**
 * The in-process broker the walkthrough provider (`provider.ts`) is a client of, standing in for a
 * broker process: named queues of stored messages (headers and JSON text, as on a wire), each with
 * its dead letters, delayed sends on timers, and consumers that hold at most `prefetch` unacknowledged
 * messages. It outlives the providers built on it, as a broker outlives its clients.
 */

/** A message as the broker stores it. */
export interface Stored {
  readonly headers: Record<string, string>;
  readonly body: string;
  /** Handed out before and given back (a nack, or its consumer closed). */
  redelivered: boolean;
}

/** One consumer of one queue. */
export class Consumer {
  readonly held = new Set<Stored>();
  active = true;

  constructor(
    private readonly queue: BrokerQueue,
    readonly prefetch: number,
    readonly onMessage: (message: Stored) => void,
  ) {}

  /** Settles a held message; false when this consumer no longer holds it. */
  ack(message: Stored): boolean {
    if (!this.held.delete(message)) return false;
    this.queue.dispatch();
    return true;
  }

  /** Gives a held message back to the head of the queue, flagged redelivered. */
  nack(message: Stored): boolean {
    if (!this.held.delete(message)) return false;
    message.redelivered = true;
    this.queue.ready.unshift(message);
    this.queue.dispatch();
    return true;
  }

  /** Stops taking messages; held ones stay held. */
  cancel(): void {
    this.active = false;
  }

  /** Leaves the queue; every message still held goes back, flagged redelivered. */
  close(): void {
    this.active = false;
    this.queue.consumers.splice(this.queue.consumers.indexOf(this), 1);
    for (const message of [...this.held].reverse()) this.nack(message);
  }
}

class BrokerQueue {
  ready: Stored[] = [];
  dead: Stored[] = [];
  readonly timers = new Set<NodeJS.Timeout>();
  readonly consumers: Consumer[] = [];
  /** Only the first consumer is served (FIFO and ordered groups: one consumer sees the whole queue). */
  single = false;
  /** Deleted with its dead letters kept: they stay browsable, nothing else is left. */
  gone = false;
  #turn = 0;
  #scheduled = false;

  send(message: Stored, delayMs: number): void {
    this.gone = false;
    if (delayMs <= 0) {
      this.ready.push(message);
      this.dispatch();
      return;
    }
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.send(message, 0);
    }, delayMs);
    this.timers.add(timer);
  }

  /** Hands ready messages to consumers with room, round robin, on the next microtask. */
  dispatch(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      while (this.ready.length > 0) {
        const serving = this.single ? this.consumers.slice(0, 1) : this.consumers;
        const open = serving.filter((c) => c.active && c.held.size < c.prefetch);
        const consumer = open[this.#turn++ % open.length];
        if (consumer === undefined) return;
        const message = this.ready.shift() as Stored;
        consumer.held.add(message);
        consumer.onMessage(message);
      }
    });
  }

  consume(prefetch: number, single: boolean, onMessage: (message: Stored) => void): Consumer {
    const consumer = new Consumer(this, prefetch, onMessage);
    this.consumers.push(consumer);
    this.single ||= single;
    this.gone = false;
    this.dispatch();
    return consumer;
  }

  get inFlight(): number {
    return this.consumers.reduce((n, c) => n + c.held.size, 0);
  }
}

export class WalkthroughBroker {
  /** By queue key: a queue's destination, or `<topic>#<subscription>`. */
  readonly queues = new Map<string, BrokerQueue>();
  /** Topic → its subscriptions, each with its own queue. */
  readonly topics = new Map<string, Set<string>>();

  /** The subscriptions of a topic (a topic is known once published to or subscribed). */
  subscriptionsOf(topic: string): Set<string> {
    let subscriptions = this.topics.get(topic);
    if (subscriptions === undefined) {
      subscriptions = new Set();
      this.topics.set(topic, subscriptions);
    }
    return subscriptions;
  }

  queue(key: string): BrokerQueue {
    let queue = this.queues.get(key);
    if (queue === undefined) {
      queue = new BrokerQueue();
      this.queues.set(key, queue);
    }
    return queue;
  }
}
