import {
  type DeadLetterReason,
  type Delivery,
  type Destination,
  type DurabilityCounters,
  type HandlerResult,
  HandlerTimeoutError,
  type Logger,
  type MessageHandler,
  QUEUE_PREFIX,
  resolveRetryPolicy,
  settleAfterOf,
  TOPIC_PREFIX,
} from "@factflow/protocols";
import {
  decideSettlement,
  emptyDurabilityCounters,
  type HandlerOutcome,
  type ResolvedSubscribeOptions,
  type SettlementContext,
  SettlementReport,
  type SettlementVerdict,
} from "@factflow/provider-kit";
import type { EmbeddedConfig } from "./config.js";
import { type ActiveDelivery, Consumer } from "./consumer.js";
import type { Journal } from "./journal.js";
import { type PreparedMessage, type StoredMessage, toEnvelope } from "./message.js";
import { queueKey, subscriptionKey, type Target } from "./naming.js";
import { PhysicalQueue } from "./physical-queue.js";
import { mergeLayout, type QueueDefinition, sameLayout } from "./queue-options.js";
import { Scheduler } from "./scheduler.js";

const HAND_BACK: SettlementVerdict = { kind: "hand-back" };

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
  nextSeq = 1;
  readonly counters: DurabilityCounters = emptyDurabilityCounters();
  readonly scheduler = new Scheduler();
  #consumers = 0;
  closed = false;
  readonly #pump = (queue: PhysicalQueue): void => this.pump(queue);
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
      this.pump(queue);
    }
  }

  /** Counts a stored message; the durable mode also indexes it, since compaction rewrites them all. */
  adopt(message: StoredMessage): void {
    if (this.journal.durable) this.live.set(message.seq, message);
    this.liveCount++;
    this.liveBytes += message.bytes;
  }

  #forget(message: StoredMessage): void {
    if (this.journal.durable) this.live.delete(message.seq);
    this.liveCount--;
    this.liveBytes -= message.bytes;
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
  ): Consumer {
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
    const consumer = new Consumer(
      queue,
      destination,
      options.subscription,
      handler,
      Math.min(prefetch, concurrency),
      retry,
      requested.handlerTimeoutMs ?? def?.handlerTimeoutMs ?? options.handlerTimeoutMs,
      new SettlementReport(
        this.counters,
        { destination, name: options.subscription },
        options.onSettled,
        this.logger,
      ),
      options.releasesSignal,
    );
    queue.consumers = [...queue.consumers, consumer];
    consumer.sweep = setInterval(() => this.#sweep(consumer), consumer.sweepPeriodMs);
    consumer.sweep.unref();
    this.#consumers++;
    this.scheduler.setKeepAlive(true);
    this.pump(queue);
    return consumer;
  }

  /**
   * Stops a consumer: in-flight handlers are aborted and their messages go back to the front; a
   * delivery whose handler already returned is settled once its `settleAfter` has.
   */
  detach(consumer: Consumer, reason: string, closing = false): void {
    if (consumer.closed) return;
    consumer.closed = true;
    clearInterval(consumer.sweep);
    const queue = consumer.queue;
    queue.consumers = queue.consumers.filter((c) => c !== consumer);
    this.#consumers--;
    this.scheduler.setKeepAlive(this.#consumers > 0);
    // A delivery whose handler returned waits only for its settleAfter: it settles then, instead of
    // handing back a message whose work is done.
    for (const active of [...consumer.active])
      if (closing || active.returned !== true) this.#abandon(active, reason);
    if (!this.closed) this.pump(queue);
  }

  /** Hands ready messages to consumers with free slots, round-robin. Re-entrant calls are folded in. */
  pump(queue: PhysicalQueue): void {
    if (queue.pumping) {
      queue.pumpAgain = true;
      return;
    }
    if (this.#mustYield()) {
      // Handlers that settle synchronously and publish again keep the broker busy on promise
      // continuations alone, which never let timers, I/O or other requests run: hand the next
      // dispatch to the next turn of the event loop instead.
      if (!queue.pumpDeferred) {
        queue.pumpDeferred = true;
        setImmediate(() => {
          queue.pumpDeferred = false;
          this.pump(queue);
        });
      }
      return;
    }
    queue.pumping = true;
    try {
      do {
        queue.pumpAgain = false;
        const now = Date.now();
        for (;;) {
          if (this.closed || queue.ready.size === 0) break;
          const consumers = queue.consumers;
          const n = consumers.length;
          let chosen: Consumer | undefined;
          for (let i = 0; i < n; i++) {
            const candidate = consumers[(queue.cursor + i) % n] as Consumer;
            if (candidate.hasCapacity) {
              chosen = candidate;
              queue.cursor = (queue.cursor + i + 1) % n;
              break;
            }
          }
          if (chosen === undefined) break;
          const message = queue.ready.next(now);
          if (message === undefined) break;
          this.#dispatch(chosen, message, now);
        }
      } while (queue.pumpAgain);
    } finally {
      queue.pumping = false;
    }
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

  #dispatch(consumer: Consumer, message: StoredMessage, now: number): void {
    consumer.queue.inFlight++;
    const active: ActiveDelivery = {
      message,
      consumer,
      controller: consumer.shared ?? consumer.signals.take(),
      startedAt: now,
      done: false,
    };
    consumer.active.add(active);
    // A running handler has a deadline this sweep enforces: while one runs, the sweep keeps the
    // process alive, or a handler waiting only for its timeout would end a process mid-delivery.
    if (consumer.active.size === 1) consumer.sweep?.ref();
    const delivery: Delivery = {
      message: toEnvelope(message),
      destination: consumer.destination,
      subscription: consumer.subscription,
      attempt: message.attempt,
      redelivered: message.redelivered,
    };
    let result: Promise<HandlerResult> | HandlerResult;
    try {
      result = consumer.handler(delivery, active.controller.signal);
    } catch (error) {
      this.#settle(active, { kind: "threw", error });
      return;
    }
    if (typeof (result as Promise<HandlerResult>)?.then === "function") {
      (result as Promise<HandlerResult>).then(
        (value) => this.#returned(active, value),
        (error: unknown) => this.#settle(active, { kind: "threw", error }),
      );
    } else {
      this.#returned(active, result as HandlerResult);
    }
  }

  /** A handler's result, carried out once its `settleAfter` (if any) has settled. */
  #returned(active: ActiveDelivery, result: HandlerResult): void {
    const after = settleAfterOf(result);
    // Already settled by a timeout or a stop: the late result settles nothing (see #settle), and
    // counted as settling it would free a slot no handler gave back.
    if (after === undefined || active.done) {
      this.#settle(active, { kind: "returned", result });
      return;
    }
    // The handler's slot goes to the next delivery while this one waits to be settled.
    active.returned = true;
    active.consumer.settling++;
    const settle = () => this.#settle(active, { kind: "returned", result });
    after.then(settle, settle);
    this.pump(active.consumer.queue);
  }

  #release(active: ActiveDelivery): void {
    active.done = true;
    if (active.returned === true) active.consumer.settling--;
    active.consumer.active.delete(active);
    if (active.consumer.active.size === 0) active.consumer.sweep?.unref();
    active.consumer.queue.inFlight--;
  }

  /** Subscription or provider closing mid-handler: back to the front, no attempt consumed. */
  #abandon(active: ActiveDelivery, reason: string): void {
    if (active.done) return;
    this.#release(active);
    const message = active.message;
    message.redelivered = true;
    // The message is handed out again from this broker's own memory, so it is counted here.
    this.counters.redelivered++;
    active.consumer.queue.returnToFront(message, Date.now());
    active.consumer.report.settled(HAND_BACK, { messageId: message.id, attempt: message.attempt });
    active.controller.abort(new Error(`[factflow/embedded] ${reason}: the message will be redelivered`));
  }

  #sweep(consumer: Consumer): void {
    if (consumer.active.size === 0) return;
    const cutoff = Date.now() - consumer.handlerTimeoutMs;
    for (const active of [...consumer.active])
      if (active.returned !== true && active.startedAt <= cutoff) this.#timeout(active);
  }

  #timeout(active: ActiveDelivery): void {
    if (active.done) return;
    const ms = active.consumer.handlerTimeoutMs;
    this.#release(active);
    if (active.controller !== active.consumer.shared) {
      active.controller.abort(new HandlerTimeoutError(ms));
    }
    const { consumer, message } = active;
    this.#apply(
      consumer,
      message,
      decideSettlement({ kind: "timed-out", timeoutMs: ms }, this.#context(consumer, message)),
    );
    this.pump(active.consumer.queue);
  }

  #context(consumer: Consumer, message: StoredMessage): SettlementContext {
    return { attempt: message.attempt, policy: consumer.retry, isTopic: consumer.queue.isTopicSubscription };
  }

  #settle(active: ActiveDelivery, outcome: HandlerOutcome): void {
    if (active.done) {
      // Already returned to the queue by an abort or a timeout; this late result settles nothing.
      this.counters.superseded++;
      return;
    }
    this.#release(active);
    const { consumer, message } = active;
    if (active.controller !== consumer.shared) consumer.signals.give(active.controller);
    this.#apply(consumer, message, decideSettlement(outcome, this.#context(consumer, message)));
    this.pump(consumer.queue);
  }

  #apply(consumer: Consumer, message: StoredMessage, verdict: SettlementVerdict): void {
    const queue = consumer.queue;
    const settled = { messageId: message.id, attempt: message.attempt };
    switch (verdict.kind) {
      case "ack":
        queue.release(message);
        this.#forget(message);
        this.journal.ack(message);
        break;
      case "dead":
        this.deadLetter(queue, message, verdict.reason, verdict.lastError);
        break;
      case "retry":
        this.#retry(consumer, message, verdict);
        break;
      case "hand-back":
        // Only a stop hands back, and stops go through #abandon; kept for completeness.
        queue.returnToFront(message, Date.now());
    }
    consumer.report.settled(verdict, settled);
  }

  /** Carries out a retry verdict: the next attempt, after the kit's delay, back at the front. */
  #retry(
    consumer: Consumer,
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
    consumer.queue.returnToFront(message, now);
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

  /** Aborts every handler and stops the scheduler; waiting state stays as the journal has it. */
  close(): void {
    this.closed = true;
    for (const queue of this.queues.values()) {
      // The journal closes next: nothing may settle after this, so every delivery goes back.
      for (const consumer of queue.consumers) this.detach(consumer, "provider closed", true);
    }
    this.scheduler.stop();
  }
}
