import {
  type DeadLetterReason,
  type Destination,
  type DurabilityCounters,
  type Logger,
  type MessageHandler,
  QUEUE_PREFIX,
  resolveRetryPolicy,
  TOPIC_PREFIX,
} from "@factflow/protocols";
import {
  emptyDurabilityCounters,
  type ResolvedSubscribeOptions,
  type SettlementVerdict,
} from "@factflow/provider-kit";
import type { EmbeddedConfig } from "./config.js";
import { emptyReadAhead, type Journal } from "./journal.js";
import { dropContent, type PreparedMessage, restoreContent, type StoredMessage } from "./message.js";
import { queueKey, subscriptionKey, type Target } from "./naming.js";
import { PhysicalQueue } from "./physical-queue.js";
import { mergeLayout, type QueueDefinition, sameLayout } from "./queue-options.js";
import { Scheduler } from "./scheduler.js";
import { EmbeddedSubscription } from "./subscription.js";

/**
 * The in-process broker: physical queues, topics and their durable subscriptions, dispatch to
 * consumers and settlement of what handlers return. The journal makes each change durable in the
 * file mode; this class never touches the disk itself.
 */
/** Longest stretch of dispatching without letting the event loop turn, in ms. */
const SLICE_MS = 10;

export class Broker {
  readonly queues = new Map<string, PhysicalQueue>();
  /** Topic name → subscription name → its physical queue. */
  readonly topics = new Map<string, Map<string, PhysicalQueue>>();
  /** File mode: every stored message not yet acked or discarded (dead letters included), by sequence. */
  readonly live = new Map<number, StoredMessage>();
  liveBytes = 0;
  liveCount = 0;
  /** Bytes of the live messages whose content is in memory (`memoryBudgetBytes` bounds it). */
  residentBytes = 0;
  /** Live messages whose content is paged out to the log (file mode). */
  pagedOut = 0;
  nextSeq = 1;
  readonly counters: DurabilityCounters = emptyDurabilityCounters();
  readonly scheduler = new Scheduler();
  #consumers = 0;
  closed = false;
  readonly #pump = (queue: PhysicalQueue): void => this.pump(queue);
  readonly #pageIn = (queue: PhysicalQueue, message: StoredMessage): void => this.pageIn(queue, message);
  /** When the current stretch of work without an event-loop turn began (see `#mustYield`). */
  #sliceStart = 0;
  #sliceOpen = false;

  constructor(
    readonly config: EmbeddedConfig,
    public journal: Journal,
    readonly logger: Logger,
  ) {}

  queueNamed(name: string): PhysicalQueue {
    const key = queueKey(name);
    let queue = this.queues.get(key);
    if (queue === undefined) {
      queue = new PhysicalQueue(
        key,
        `${QUEUE_PREFIX}${name}` as Destination,
        undefined,
        this.scheduler,
        this.#pump,
        this.#pageIn,
      );
      this.queues.set(key, queue);
    }
    return queue;
  }

  /** The durable subscription queue of a topic; `created` when this call made it. */
  subscriptionQueue(topic: string, subscription: string): { queue: PhysicalQueue; created: boolean } {
    let subs = this.topics.get(topic);
    if (subs === undefined) {
      subs = new Map();
      this.topics.set(topic, subs);
    }
    const existing = subs.get(subscription);
    if (existing !== undefined) return { queue: existing, created: false };
    const key = subscriptionKey(topic, subscription);
    const queue = new PhysicalQueue(
      key,
      `${TOPIC_PREFIX}${topic}` as Destination,
      subscription,
      this.scheduler,
      this.#pump,
      this.#pageIn,
    );
    this.queues.set(key, queue);
    subs.set(subscription, queue);
    return { queue, created: true };
  }

  /**
   * Stores a message in every queue the destination reaches. Returns a promise only when there is
   * something to wait for (the file mode's commit); the memory mode stores it synchronously.
   */
  publish(target: Target, prepared: PreparedMessage): Promise<void> | undefined {
    if (target.kind === "queue") {
      // One queue (the common case) stores the prepared object itself, with no arrays around it.
      const queue = this.queueNamed(target.name);
      this.counters.published++;
      prepared.seq = this.nextSeq++;
      prepared.queueKey = queue.key;
      if (this.journal.durable)
        return this.journal.publish([prepared]).then(() => this.#deliverOne(queue, prepared));
      this.#deliverOne(queue, prepared);
      return undefined;
    }
    let subs = this.topics.get(target.name);
    if (subs === undefined) {
      subs = new Map();
      this.topics.set(target.name, subs);
    }
    const queues = [...subs.values()];
    this.counters.published++;
    // A topic stores one copy per subscription (the first is the prepared object itself).
    const messages: StoredMessage[] = queues.map((queue, i) => {
      const message = i === 0 ? prepared : { ...prepared };
      message.seq = this.nextSeq++;
      message.queueKey = queue.key;
      return message;
    });
    if (this.journal.durable && messages.length > 0) {
      return this.journal.publish(messages).then(() => this.#deliverable(queues, messages));
    }
    this.#deliverable(queues, messages);
    return undefined;
  }

  #deliverOne(queue: PhysicalQueue, message: StoredMessage): void {
    this.counters.confirmed++;
    if (this.closed) return;
    this.adopt(message);
    queue.enqueue(message, Date.now());
    this.pageOutIfOverBudget(message);
    this.pump(queue);
  }

  #deliverable(queues: readonly PhysicalQueue[], messages: readonly StoredMessage[]): void {
    this.counters.confirmed++;
    if (this.closed) return;
    const now = Date.now();
    for (let i = 0; i < messages.length; i++) {
      const message = messages[i] as StoredMessage;
      const queue = queues[i] as PhysicalQueue;
      this.adopt(message);
      queue.enqueue(message, now);
      this.pageOutIfOverBudget(message);
      this.pump(queue);
    }
  }

  /** Counts a stored message; the durable mode also indexes it, since compaction rewrites them all. */
  adopt(message: StoredMessage): void {
    if (this.journal.durable) this.live.set(message.seq, message);
    this.liveCount++;
    this.liveBytes += message.bytes;
    this.residentBytes += message.bytes;
  }

  #forget(message: StoredMessage): void {
    if (this.journal.durable) this.live.delete(message.seq);
    this.liveCount--;
    this.liveBytes -= message.bytes;
    if (message.resident) this.residentBytes -= message.bytes;
    else this.pagedOut--;
  }

  /**
   * File mode: once the content of the live messages in memory exceeds `memoryBudgetBytes`, a
   * message that has just started to wait keeps only what ordering and settlement need; its content
   * stays in the log, read back when it is delivered ({@link pageIn}). Called once its place in the
   * queue is set (a FIFO lane may be keyed by its body). Dead letters stay in memory.
   */
  pageOutIfOverBudget(message: StoredMessage): void {
    if (this.residentBytes <= this.config.memoryBudgetBytes || !this.journal.durable) return;
    if (!message.resident || message.dead !== undefined || message.logOffset < 0) return;
    dropContent(message);
    this.residentBytes -= message.bytes;
    this.pagedOut++;
  }

  /** Reads a paged-out message's content back from the log. Throws when the log cannot be read. */
  pageIn(queue: PhysicalQueue, message: StoredMessage): void {
    restoreContent(message, this.journal.readContent(message, queue.readAhead));
    this.pagedOut--;
    this.residentBytes += message.bytes;
  }

  /** After compaction: every live message's record is where the compacted log put it. */
  relocated(): void {
    for (const message of this.live.values()) {
      if (message.nextLogOffset < 0) continue;
      message.logOffset = message.nextLogOffset;
      message.logLength = message.nextLogLength;
      message.nextLogOffset = -1;
    }
    for (const queue of this.queues.values()) queue.readAhead.generation = -1;
  }

  /** Applies a queue definition (layout + subscription defaults). Returns whether anything changed. */
  applyDefinition(queue: PhysicalQueue, definition: QueueDefinition): boolean {
    const changed = JSON.stringify(queue.definition ?? null) !== JSON.stringify(definition);
    queue.definition = definition;
    const layout = mergeLayout(queue.layout, definition);
    if (!sameLayout(layout, queue.layout)) queue.relayout(layout);
    this.pump(queue);
    return changed;
  }

  attach(
    queue: PhysicalQueue,
    destination: Destination,
    handler: MessageHandler,
    options: ResolvedSubscribeOptions,
  ): EmbeddedSubscription {
    // What the subscriber set wins; the queue's definition fills what it left out, then the
    // provider's `defaultPrefetch`, then the kit's defaults (already in `options`).
    const requested = options.requested;
    const layout = mergeLayout(queue.layout, requested);
    if (!sameLayout(layout, queue.layout)) queue.relayout(layout);
    const def = queue.definition;
    const concurrency = requested.concurrency ?? def?.concurrency ?? options.concurrency;
    // As the kit defaults it: the default prefetch, or the concurrency when that is larger.
    const prefetch =
      requested.prefetch ?? def?.prefetch ?? Math.max(this.config.defaultPrefetch, concurrency);
    const retry = resolveRetryPolicy(
      Object.fromEntries(
        Object.entries({ ...def?.retry, ...requested.retry }).filter(([, value]) => value !== undefined),
      ),
    );
    const handlerTimeoutMs = requested.handlerTimeoutMs ?? def?.handlerTimeoutMs ?? options.handlerTimeoutMs;
    const subscription: EmbeddedSubscription = new EmbeddedSubscription(
      this,
      queue,
      destination,
      handler,
      { ...options, retry, handlerTimeoutMs },
      Math.min(prefetch, concurrency),
      () => this.#detached(subscription),
    );
    queue.consumers = [...queue.consumers, subscription];
    this.#consumers++;
    this.scheduler.setKeepAlive(true);
    return subscription;
  }

  /** A subscription started to stop: it takes no more messages; the runtime hands back the rest. */
  #detached(subscription: EmbeddedSubscription): void {
    const queue = subscription.queue;
    if (!queue.consumers.includes(subscription)) return;
    queue.consumers = queue.consumers.filter((c) => c !== subscription);
    this.#consumers--;
    this.scheduler.setKeepAlive(this.#consumers > 0);
  }

  /** Hands ready messages to consumers with free slots, round-robin. Re-entrant calls are folded in. */
  pump(queue: PhysicalQueue): void {
    if (queue.pumping) {
      queue.pumpAgain = true;
      return;
    }
    // Nothing to hand out (a settled delivery's pump, mostly): no slice bookkeeping either.
    if (queue.ready.size === 0 || this.closed) return;
    if (this.#mustYield()) {
      // Handlers that settle synchronously and publish again keep the broker busy on promise
      // continuations alone, which never let timers, I/O or other requests run: hand the next
      // dispatch to the next turn of the event loop instead.
      this.#pumpLater(queue);
      return;
    }
    queue.pumping = true;
    try {
      let taken = 0;
      do {
        queue.pumpAgain = false;
        const now = Date.now();
        for (;;) {
          if (this.closed || queue.ready.size === 0) break;
          // Each message taken runs its handler's synchronous part here: with hundreds of free
          // slots (a route's concurrency), one pump would run hundreds of handlers in one turn.
          if ((++taken & 7) === 0 && this.#sliceSpent()) {
            this.#pumpLater(queue);
            queue.pumpAgain = false;
            break;
          }
          const consumers = queue.consumers;
          const n = consumers.length;
          let chosen: EmbeddedSubscription | undefined;
          for (let i = 0; i < n; i++) {
            const candidate = consumers[(queue.cursor + i) % n] as EmbeddedSubscription;
            if (candidate.hasCapacity) {
              chosen = candidate;
              queue.cursor = (queue.cursor + i + 1) % n;
              break;
            }
          }
          if (chosen === undefined) break;
          const message = queue.ready.next(now);
          if (message === undefined) break;
          if (!message.resident && !this.#pagedIn(queue, message, now)) break;
          chosen.take(message);
        }
      } while (queue.pumpAgain);
      // A drained queue lets go of the log it read ahead.
      if (queue.ready.size === 0 && queue.readAhead.data.length > 0) queue.readAhead = emptyReadAhead();
    } finally {
      queue.pumping = false;
    }
  }

  /**
   * Pages a message taken for delivery back in. When the log cannot be read, the message goes back
   * to the front of its queue, unconsumed, and the failure is logged; the next pump tries again.
   */
  #pagedIn(queue: PhysicalQueue, message: StoredMessage, now: number): boolean {
    try {
      this.pageIn(queue, message);
      return true;
    } catch (error) {
      queue.returnToFront(message, now);
      this.logger.error("[factflow/embedded] could not read a waiting message back from the queue log", {
        queue: queue.key,
        seq: message.seq,
        error: error instanceof Error ? error.message : String(error),
      });
      return false;
    }
  }

  /** Pumps `queue` again in the next turn of the event loop (once, however often asked). */
  #pumpLater(queue: PhysicalQueue): void {
    if (queue.pumpDeferred) return;
    queue.pumpDeferred = true;
    setImmediate(() => {
      queue.pumpDeferred = false;
      this.pump(queue);
    });
  }

  /** The current slice (opened by {@link #mustYield}) has run longer than {@link SLICE_MS}. */
  #sliceSpent(): boolean {
    return performance.now() - this.#sliceStart > SLICE_MS;
  }

  /**
   * True once the broker has worked for `SLICE_MS` without the event loop turning. A slice opens at
   * the first pump and closes when a `setImmediate` scheduled then gets to run: if it has not run
   * after `SLICE_MS`, nothing but microtasks has run since.
   */
  #mustYield(): boolean {
    const now = performance.now();
    if (!this.#sliceOpen) {
      this.#sliceOpen = true;
      this.#sliceStart = now;
      setImmediate(() => {
        this.#sliceOpen = false;
      });
      return false;
    }
    return now - this.#sliceStart > SLICE_MS;
  }

  /** A delivery's handler acknowledged it: gone for good. */
  ack(queue: PhysicalQueue, message: StoredMessage): void {
    queue.release(message);
    this.#forget(message);
    this.journal.ack(message);
  }

  /**
   * A delivery given back untouched (its subscription stopped): back to the front, no attempt
   * consumed. The message is handed out again from this broker's own memory, so it is counted here.
   */
  handBack(queue: PhysicalQueue, message: StoredMessage): void {
    message.redelivered = true;
    this.counters.redelivered++;
    queue.returnToFront(message, Date.now());
    this.pump(queue);
  }

  /** Carries out a retry verdict: the next attempt, after the kit's delay, back at the front. */
  retry(
    queue: PhysicalQueue,
    message: StoredMessage,
    verdict: Extract<SettlementVerdict, { kind: "retry" }>,
  ): void {
    const now = Date.now();
    message.attempt = verdict.nextAttempt;
    message.lastError = verdict.lastError;
    message.deliveryHeaders = undefined;
    message.redelivered = verdict.incomplete;
    message.notBefore = now + verdict.delayMs;
    this.journal.retry(message);
    queue.returnToFront(message, now);
  }

  deadLetter(
    queue: PhysicalQueue,
    message: StoredMessage,
    reason: DeadLetterReason,
    lastError: string | undefined,
  ): void {
    queue.release(message);
    message.lastError = lastError;
    message.deliveryHeaders = undefined;
    message.dead = { reason, at: new Date().toISOString(), attempts: message.attempt, lastError };
    queue.dead.set(message.seq, message);
    this.journal.deadLetter(message);
  }

  /** Moves dead letters back to their queue with a fresh budget. */
  async redrive(queue: PhysicalQueue, messages: readonly StoredMessage[]): Promise<void> {
    if (messages.length === 0) return;
    const now = Date.now();
    for (const message of messages) {
      queue.dead.delete(message.seq);
      message.dead = undefined;
      message.attempt = 1;
      message.lastError = undefined;
      message.deliveryHeaders = undefined;
      message.notBefore = 0;
      message.redelivered = false;
      // The queue's layout may have changed while it was dead: recompute its lane on the way back.
      message.lane = undefined;
    }
    const durable = this.journal.redrive(messages);
    for (const message of messages) queue.enqueue(message, now);
    this.pump(queue);
    await durable;
  }

  async discard(queue: PhysicalQueue, message: StoredMessage): Promise<void> {
    queue.dead.delete(message.seq);
    this.#forget(message);
    await this.journal.discard(message);
  }

  /**
   * Stops every subscription (their handlers are aborted, their messages handed back) and the
   * scheduler; waiting state stays as the journal has it. Resolves once the stops are done: the
   * journal closes next, and nothing is settled after this ({@link EmbeddedSubscription.isCurrent}).
   */
  async close(): Promise<void> {
    const stops: Promise<void>[] = [];
    for (const queue of this.queues.values())
      for (const consumer of queue.consumers) stops.push(consumer.runtime.unsubscribe());
    await Promise.all(stops);
    this.closed = true;
    this.scheduler.stop();
  }
}
