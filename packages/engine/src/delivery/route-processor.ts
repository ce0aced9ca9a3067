import {
  type Adapter,
  type Delivery,
  type HandlerResult,
  isFactflowError,
  isHandlerTimeout,
  isStatefulAdapter,
  type LineageErrorInfo,
  MessageStatus,
  type RetryPolicy,
  type RouteConfig,
  type SettledDelivery,
  type Subscription,
  TraceAttribute,
  type Tracer,
  unwrapHandlerResult,
} from "@factflow/protocols";
import type { RouteQueueOptions } from "../config/route-queue-options.js";
import { FatalAdapterError } from "../errors.js";
import type { RouteActivity } from "../execution/execution-progress.js";
import { isReseeded } from "../execution/reseed.js";
import { nowIso } from "../ids.js";
import { errorInfoOf } from "../lineage/lineage-rows.js";
import { restoreQueuedRow } from "../lineage/queued-row.js";
import type { ExecutionRuntime } from "../runtime.js";
import {
  type ChainOutcome,
  type ChainRun,
  DeliveryAbandoned,
  recordAbandoned,
  runChain,
} from "./adapter-chain.js";
import { type Abortable, DeliverySignal } from "./delivery-signal.js";
import { type Admission, admitDelivery } from "./duplicate-admission.js";
import { publishOutputs } from "./outbound-publisher.js";
import { recordSkipped } from "./record-skipped.js";
import type { RouteCondition } from "./route-condition.js";
import { Semaphore, Watermark } from "./semaphore.js";
import { BatchState, type HeldDelivery } from "./stateful-batch.js";
import { ChainTrace, contextOf, endDeliverySpan, startDeliverySpan } from "./tracing.js";

/** Counters of one route, reported in `route_progress` events and the execution's counters. */
export interface RouteCounters {
  acknowledged: number;
  failed: number;
  rejected: number;
  abandoned: number;
  published: number;
  inFlight: number;
  held: number;
  /** Redeliveries of messages already settled for good here: acknowledged without running adapters. */
  duplicates: number;
  /** Messages the route's condition skipped (acknowledged, lineage `skipped`). */
  skipped: number;
}

export interface RouteProcessorOptions {
  readonly name: string;
  readonly route: RouteConfig;
  readonly adapters: readonly Adapter[];
  readonly retry: RetryPolicy;
  readonly maxFanoutPending: number;
  readonly handlerTimeoutMs: number;
  /**
   * How long a delivery may be in flight before its message row is marked `processing`. Deliveries
   * that settle sooner go straight from `pending` to their final status. @default 100
   */
  readonly processingMarkMs?: number;
  /** Subscribe options from the route's queue settings (groups, priority, timeout, dead-lettering). */
  readonly queueOptions?: RouteQueueOptions;
  /** Evaluated before the adapters; `false` skips the message. */
  readonly condition?: RouteCondition;
  /** Traces every delivery (docs/observability.md). @default no tracing */
  readonly tracer?: Tracer;
}

/**
 * Consumes one route's inbound queue. A delivery acquires the execution's global slot, then the
 * route slot, then waits below the fan-out watermark; it runs the adapter chain, publishes every
 * outbound message (lineage rows registered durably first) and only then returns ACKNOWLEDGED.
 */
export class RouteProcessor {
  readonly name: string;
  readonly counters: RouteCounters = {
    acknowledged: 0,
    failed: 0,
    rejected: 0,
    abandoned: 0,
    published: 0,
    inFlight: 0,
    held: 0,
    duplicates: 0,
    skipped: 0,
  };
  readonly batches = new Map<number, BatchState>();
  #options: RouteProcessorOptions;
  readonly #runtime: ExecutionRuntime;
  #routeSlots: Semaphore;
  /** Set by `stop`: a reconfigure in progress must not subscribe again. */
  #stopped = false;
  readonly #watermark: Watermark;
  #subscription: Subscription | undefined;
  /** Message ids whose row is left open until the provider reports the verdict (see #verdict). */
  readonly #awaitingVerdict = new Map<string, AwaitingVerdict>();
  /** Message ids dead-lettered while their handler still ran; its late result is not recorded. */
  readonly #closedByVerdict = new Set<string>();
  /**
   * Deliveries in flight whose row is not yet marked `processing`: message id → attempt. A sweep
   * every `processingMarkMs` marks them. Most deliveries settle before the sweep, and writing
   * `processing` for them would cost one lineage update each (the row was usually committed before
   * the delivery, so the writer cannot fold it into the final one).
   */
  readonly #unmarked = new Map<string, number>();
  #markTimer: NodeJS.Timeout | undefined;
  /** What the execution's abort reaches: controllers and cancel listeners of deliveries in flight (see DeliverySignal). */
  readonly #abortables = new Set<Abortable>();
  /** Trace context of deliveries parked in a batch, by message id: the leader links them (tracing only). */
  readonly #heldTraces = new Map<string, Record<string, string>>();
  /** Deliveries in flight waiting for a slot or below the fan-out watermark (the slow path only). */
  #waitingForSlot = 0;
  /** Deliveries in flight whose outputs are being registered or published. */
  #publishing = 0;
  /** Deliveries whose handler returned and whose lineage commit the provider still awaits. */
  #settling = 0;

  constructor(runtime: ExecutionRuntime, options: RouteProcessorOptions) {
    this.name = options.name;
    this.#options = options;
    this.#runtime = runtime;
    // `concurrency: 0` pauses the route (no subscription); one permit keeps the semaphore valid.
    this.#routeSlots = new Semaphore(Math.max(1, options.route.inbound.concurrency));
    this.#watermark = new Watermark(options.maxFanoutPending);
    options.adapters.forEach((adapter, index) => {
      if (isStatefulAdapter(adapter)) this.batches.set(index, new BatchState());
    });
  }

  /** No handler working, no fan-out publish pending (held batch deliveries are counted apart). */
  get isActiveIdle(): boolean {
    return this.counters.inFlight === 0 && this.#watermark.pending === 0 && this.#settling === 0;
  }

  /** Deliveries parked in stateful batches. */
  get heldCount(): number {
    return this.counters.held;
  }

  /** Publishes of outputs done since the start: progress a stall check sees between settlements. */
  get publishesDone(): number {
    return this.#watermark.completed;
  }

  /** What the route is doing right now, for a stall diagnosis. */
  activity(): RouteActivity {
    return {
      route: this.name,
      queue: this.#options.route.inbound.queue,
      inFlight: this.counters.inFlight,
      waitingForSlot: this.#waitingForSlot,
      publishing: this.#publishing,
      outputsPending: this.#watermark.pending,
      held: this.counters.held,
      paused: this.#options.route.inbound.concurrency === 0,
      counters: { ...this.counters },
    };
  }

  async start(): Promise<void> {
    const executionSignal = this.#runtime.signal;
    executionSignal.addEventListener(
      "abort",
      () => {
        for (const abortable of [...this.#abortables]) abortable.abort(executionSignal.reason);
      },
      { once: true },
    );
    this.#markTimer = setInterval(() => this.#markProcessing(), this.#options.processingMarkMs ?? 100);
    this.#markTimer.unref();
    await this.#subscribe();
    for (const [index, batch] of this.batches) {
      const adapter = this.#options.adapters[index];
      const interval =
        adapter !== undefined && isStatefulAdapter(adapter) ? (adapter.flushIntervalMs ?? 5000) : 5000;
      batch.timer = setInterval(() => void this.flushBatch(index), interval);
      batch.timer.unref();
    }
  }

  /** True while the route does not consume (`concurrency: 0`). */
  get isPaused(): boolean {
    return this.#subscription === undefined;
  }

  /**
   * Applies changed queue settings at runtime: stops consuming (in-flight deliveries go back to the
   * broker), waits for them to hand back, then subscribes with the new settings; `concurrency: 0`
   * stays paused. Messages wait in the broker meanwhile, so none is lost.
   */
  async reconfigure(route: RouteConfig, queueOptions: RouteQueueOptions, retry?: RetryPolicy): Promise<void> {
    const subscription = this.#subscription;
    this.#subscription = undefined;
    await subscription?.unsubscribe();
    for (let i = 0; i < 600 && (this.counters.inFlight > 0 || this.counters.held > 0); i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    this.#options = { ...this.#options, route, queueOptions, ...(retry === undefined ? {} : { retry }) };
    this.#routeSlots = new Semaphore(Math.max(1, route.inbound.concurrency));
    await this.#subscribe();
  }

  async #subscribe(): Promise<void> {
    const inbound = this.#options.route.inbound;
    if (inbound.concurrency === 0 || this.#stopped) return;
    // A batch can only fill if the broker hands out that many deliveries at once.
    let capacity = 0;
    for (const index of this.batches.keys()) {
      const adapter = this.#options.adapters[index];
      if (adapter !== undefined && isStatefulAdapter(adapter)) capacity += adapter.capacity ?? 0;
    }
    const concurrency = Math.max(inbound.concurrency, capacity);
    this.#subscription = await subscribeWithRetry(
      () =>
        this.#runtime.queue.subscribe(`/queue/${inbound.queue}`, (d, s) => this.#handle(d, s), {
          subscription: this.name,
          prefetch: Math.max(inbound.prefetch, concurrency),
          concurrency,
          retry: this.#options.retry,
          handlerTimeoutMs: this.#options.handlerTimeoutMs,
          // The provider's signal never outlives the delivery here: DeliverySignal and the ledger's
          // claim remove their listeners, and adapters (conditions too) get a signal of their own.
          releasesSignal: true,
          onSettled: (settled) => this.#verdict(settled),
          ...this.#options.queueOptions,
        }),
      { route: this.name, logger: this.#runtime.logger, signal: this.#runtime.signal },
    );
    // Stopped while subscribing (a reconfigure racing the end of the execution): undo it.
    if (this.#stopped) await this.stop();
  }

  /** Stops consuming; in-flight and held handlers are aborted and their messages redelivered later. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#markTimer);
    for (const batch of this.batches.values()) clearInterval(batch.timer);
    const subscription = this.#subscription;
    this.#subscription = undefined;
    await subscription?.unsubscribe();
  }

  /**
   * Emits what a stateful adapter holds (timer, or the route drained). The newest held delivery
   * carries the batch on; the others settle the way it does.
   */
  async flushBatch(index: number): Promise<void> {
    const batch = this.batches.get(index);
    const adapter = this.#options.adapters[index];
    if (batch === undefined || adapter === undefined || !isStatefulAdapter(adapter) || batch.size === 0)
      return;
    try {
      await batch.mutex.acquire(this.#runtime.signal);
    } catch {
      return;
    }
    let held: HeldDelivery[] = [];
    try {
      if (batch.size === 0) return;
      const result = await adapter.flush({
        executionId: this.#runtime.executionId,
        route: this.name,
        storage: this.#runtime.storage,
        logger: this.#runtime.logger,
        signal: this.#runtime.signal,
      });
      held = batch.take();
      const leader = held.pop();
      if (leader === undefined) return;
      if (
        result === null ||
        (result.data === null && (result.emitMessages?.length ?? 0) === 0 && result.error === undefined)
      ) {
        for (const entry of [...held, leader])
          entry.resolve({ kind: "settle", status: MessageStatus.ACKNOWLEDGED });
      } else if (result.error !== undefined || result.metadata?.fatal === true) {
        const error: LineageErrorInfo = {
          class: "AdapterError",
          message: result.error ?? "fatal",
          retryable: true,
          fatal: false,
        };
        for (const entry of [...held, leader])
          entry.resolve({ kind: "settle", status: MessageStatus.FAILED, error });
      } else {
        leader.resolve({ kind: "lead", result, followers: held });
      }
    } catch (error) {
      const info = errorInfoOf(error, { retryable: true });
      for (const entry of [...held, ...batch.take()])
        entry.resolve({ kind: "settle", status: MessageStatus.FAILED, error: info });
    } finally {
      batch.mutex.release();
    }
  }

  /** Marks the rows of deliveries still in flight since the last sweep `processing`. */
  #markProcessing(): void {
    if (this.#unmarked.size === 0) return;
    for (const [id, attempt] of this.#unmarked)
      this.#runtime.lineage.update(id, { status: "processing", attempt });
    this.#unmarked.clear();
  }

  /** Runs one delivery, inside a delivery span when the engine traces. */
  #handle(delivery: Delivery, providerSignal: AbortSignal): Promise<HandlerResult> | HandlerResult {
    const tracer = this.#options.tracer;
    const result =
      tracer === undefined
        ? this.#admit(delivery, providerSignal, undefined)
        : this.#handleTraced(tracer, delivery, providerSignal);
    if (this.#runtime.lineage.flushSettled === undefined) return result;
    if (result instanceof Promise) return result.then((value) => this.#durably(value));
    return this.#durably(result);
  }

  /**
   * Hands the provider the lineage commit to await before it settles the delivery with the broker:
   * the rows this delivery settled are durable before the broker forgets the message, so a crash
   * loses only rows of deliveries the broker hands out again. The wait runs after the handler has
   * returned (its slots are free again) and outside its timeout. A hand-back settles nothing.
   */
  #durably(result: HandlerResult): HandlerResult {
    const { status, reason } = unwrapHandlerResult(result);
    if (status === MessageStatus.PENDING) return result;
    const committed = this.#runtime.lineage.flushSettled?.();
    if (committed === undefined) return result;
    // Until the provider has settled it, the delivery still counts as work: an execution that
    // completed meanwhile would stop its subscriptions and hand the message back.
    this.#settling++;
    const settleAfter = committed.finally(() => {
      this.#settling--;
      this.#runtime.onMaybeIdle();
    });
    return reason === undefined ? { status, settleAfter } : { status, reason, settleAfter };
  }

  async #handleTraced(
    tracer: Tracer,
    delivery: Delivery,
    providerSignal: AbortSignal,
  ): Promise<HandlerResult> {
    const span = startDeliverySpan(tracer, this.#runtime.executionId, this.name, delivery);
    const trace = new ChainTrace(tracer, span);
    let result: HandlerResult;
    try {
      result = await span.run(() => this.#admit(delivery, providerSignal, trace));
    } catch (error) {
      span.end({ ok: false, message: error instanceof Error ? error.message : String(error) });
      throw error;
    }
    endDeliverySpan(span, result, trace.note);
    return result;
  }

  /**
   * Acknowledges a duplicate of a settled message without running the route (see admitDelivery).
   * Synchronous up to the route's own work when the ledger answers at once (the common case).
   */
  #admit(
    delivery: Delivery,
    providerSignal: AbortSignal,
    trace: ChainTrace | undefined,
  ): Promise<HandlerResult> | HandlerResult {
    const admission = admitDelivery(this.#runtime, this.name, delivery, providerSignal);
    if (typeof admission !== "string")
      return admission.then((decided) => this.#admitted(decided, delivery, providerSignal, trace));
    return this.#admitted(admission, delivery, providerSignal, trace);
  }

  /** The message's claim on the ledger is held from here until the delivery's handling ends. */
  #admitted(
    admission: Admission,
    delivery: Delivery,
    providerSignal: AbortSignal,
    trace: ChainTrace | undefined,
  ): Promise<HandlerResult> | HandlerResult {
    if (admission === "aborted") return MessageStatus.PENDING;
    if (admission === "duplicate" || admission === "covered") {
      this.counters.duplicates++;
      if (trace !== undefined) trace.note = "duplicate";
      // A covered copy took no claim: the parked delivery holds it.
      if (admission === "duplicate") this.#runtime.deliveries.release(delivery.message.id);
      return MessageStatus.ACKNOWLEDGED;
    }
    // A message row queued by a run that may have died with it: recorded again before any adapter
    // row of this delivery, so no adapter row ever points at a message without its row.
    const restoring = restoreQueuedRow(this.#runtime, this.name, delivery);
    if (restoring !== undefined) return restoring.then(() => this.#runRoute(delivery, providerSignal, trace));
    return this.#runRoute(delivery, providerSignal, trace);
  }

  /** The route's condition, then its chain. The caller holds the message's claim. */
  #runRoute(
    delivery: Delivery,
    providerSignal: AbortSignal,
    trace: ChainTrace | undefined,
  ): Promise<HandlerResult> | HandlerResult {
    // #process releases the claim when it is done.
    if (this.#options.condition === undefined) return this.#process(delivery, providerSignal, trace);
    return this.#testCondition(this.#options.condition, delivery, providerSignal, trace);
  }

  /** The route's condition first: `false` skips the message (acknowledged, lineage `skipped`). */
  async #testCondition(
    condition: RouteCondition,
    delivery: Delivery,
    providerSignal: AbortSignal,
    trace: ChainTrace | undefined,
  ): Promise<HandlerResult> {
    let run: boolean;
    // The condition's adapter may keep its signal: it gets one of its own, not the provider's.
    const cancellation = new DeliverySignal(providerSignal, this.#runtime.signal, this.#abortables);
    try {
      run = await condition.test(
        this.#runtime,
        this.name,
        delivery.message,
        delivery.attempt,
        cancellation.signal,
      );
    } catch (error) {
      try {
        if (providerSignal.aborted) return MessageStatus.PENDING;
        return this.#settle(delivery, MessageStatus.FAILED, errorInfoOf(error, { retryable: true }));
      } finally {
        cancellation.dispose();
        this.#runtime.deliveries.release(delivery.message.id);
      }
    }
    cancellation.dispose();
    if (!run) {
      try {
        this.counters.skipped++;
        if (trace !== undefined) trace.note = "skipped";
        return recordSkipped(this.#runtime, delivery);
      } finally {
        this.#runtime.deliveries.release(delivery.message.id);
      }
    }
    return this.#process(delivery, providerSignal, trace);
  }

  /**
   * Runs the route's chain for a delivery and settles its row. Synchronous while nothing waits (free
   * slots, a synchronous chain); otherwise the promise of the result. Every path ends in
   * {@link #end}, once.
   */
  #process(
    delivery: Delivery,
    providerSignal: AbortSignal,
    trace: ChainTrace | undefined,
  ): Promise<HandlerResult> | HandlerResult {
    const runtime = this.#runtime;
    // Either the provider (timeout, unsubscribe) or the execution (cancel, fail) may cancel the
    // handler. Its AbortSignal is made only when something waits on it (see DeliverySignal); the
    // execution's signal outlives many deliveries, so it has one listener per route that aborts every
    // controller made.
    // The handler's deadline, which the provider stops enforcing if it loses the delivery.
    const timeoutMs = this.#options.queueOptions?.handlerTimeoutMs ?? this.#options.handlerTimeoutMs;
    const signal = new DeliverySignal(
      providerSignal,
      runtime.signal,
      this.#abortables,
      Date.now() + timeoutMs,
    );
    runtime.deliveries.holdBy(delivery.message.id, signal);
    this.counters.inFlight++;
    runtime.onActivity();
    const work: DeliveryWork = {
      delivery,
      providerSignal,
      slots: 0,
      run: {
        route: this.name,
        adapters: this.#options.adapters,
        batches: this.batches,
        envelope: delivery.message,
        attempt: delivery.attempt,
        signal,
        emitted: [],
        followers: [],
        trace,
      },
    };
    let result: Promise<HandlerResult> | HandlerResult;
    try {
      result = this.#run(work);
    } catch (error) {
      return this.#failedThenEnd(work, error);
    }
    if (!(result instanceof Promise)) {
      this.#end(work);
      return result;
    }
    return result.then(
      (value) => {
        this.#end(work);
        return value;
      },
      (error: unknown) => this.#failedThenEnd(work, error),
    );
  }

  /** Takes the slots (free ones synchronously) and runs the chain. */
  #run(work: DeliveryWork): Promise<HandlerResult> | HandlerResult {
    const runtime = this.#runtime;
    if (!runtime.globalSlots.tryAcquire()) return this.#runAfterWaits(work);
    work.slots = 1;
    if (!this.#routeSlots.tryAcquire()) return this.#runAfterWaits(work);
    work.slots = 2;
    if (!this.#watermark.isBelow) return this.#runAfterWaits(work);
    return this.#runChain(work);
  }

  /** The slow path of {@link #run}: waits for the slots it does not hold yet, and the watermark. */
  async #runAfterWaits(work: DeliveryWork): Promise<HandlerResult> {
    const signal = work.run.signal;
    this.#waitingForSlot++;
    try {
      if (work.slots < 1) {
        await this.#runtime.globalSlots.acquire(signal);
        work.slots = 1;
      }
      if (work.slots < 2) {
        const routeSlots = this.#routeSlots;
        if (!routeSlots.tryAcquire()) await routeSlots.acquire(signal);
        work.slots = 2;
      }
      if (!this.#watermark.isBelow) await this.#watermark.whenBelow(signal);
    } finally {
      this.#waitingForSlot--;
    }
    return this.#runChain(work);
  }

  #runChain(work: DeliveryWork): Promise<HandlerResult> | HandlerResult {
    const { delivery, run } = work;
    // Marked `processing` by the next sweep if still in flight then (see #unmarked).
    this.#unmarked.set(delivery.message.id, delivery.attempt);
    const outcome = runChain(this.#runtime, run, delivery.message.body, 0, undefined);
    if (outcome instanceof Promise) return outcome.then((o) => this.#afterChain(work, o));
    return this.#afterChain(work, outcome);
  }

  #afterChain(work: DeliveryWork, outcome: ChainOutcome): Promise<HandlerResult> | HandlerResult {
    if (outcome.kind === "held") return this.#whileHeld(work, outcome);
    return this.#complete(work.delivery, work.run, outcome);
  }

  /** A handling that threw: decides its result (see #failed), then ends it. */
  #failedThenEnd(work: DeliveryWork, error: unknown): HandlerResult {
    try {
      return this.#failed(work.delivery, work.run, work.providerSignal, error);
    } finally {
      this.#end(work);
    }
  }

  /** What every handling does last, whatever its outcome: slots, claim and counters given back. */
  #end(work: DeliveryWork): void {
    const runtime = this.#runtime;
    const id = work.delivery.message.id;
    this.#unmarked.delete(id);
    work.run.signal.dispose();
    this.#releaseSlots(work);
    this.counters.inFlight--;
    runtime.onMaybeIdle();
    runtime.deliveries.release(id);
  }

  /** Gives back the execution's and the route's slot, whichever of them `work` holds. */
  #releaseSlots(work: DeliveryWork): void {
    if (work.slots >= 2) this.#routeSlots.release();
    if (work.slots >= 1) this.#runtime.globalSlots.release();
    work.slots = 0;
  }

  /**
   * A delivery parked in a stateful adapter's batch: its slots go back while the batch fills; it
   * settles with the batch, or carries the emitted batch on through the rest of the chain.
   */
  async #whileHeld(work: DeliveryWork, held: ChainOutcome & { kind: "held" }): Promise<HandlerResult> {
    const runtime = this.#runtime;
    const { delivery, run } = work;
    const envelope = delivery.message;
    const signal = run.signal;
    const trace = run.trace;
    let outcome: ChainOutcome = held;
    while (outcome.kind === "held") {
      // Parked in a batch: give the slots back so other work proceeds while the batch fills.
      this.#releaseSlots(work);
      this.counters.inFlight--;
      this.counters.held++;
      runtime.onMaybeIdle();
      const parked = outcome;
      let letGo = false;
      const release = () => {
        // Cancelled, or lost (its channel closed, so the broker hands the message out again): not
        // there to settle its message any more, so its copies must run, not count as covered.
        runtime.deliveries.unpark(envelope.id);
        // Under the batch's lock, so that no flush is between emitting and taking its members.
        const batch = parked.batch;
        void batch.mutex.acquire().then(() => {
          try {
            // Not in the batch any more: an emitted batch took it (see below).
            if (!batch.remove(parked.entry)) return;
            // The adapter drops the message too: the redelivery adds it again.
            const adapter = this.#options.adapters[parked.adapterIndex];
            if (adapter !== undefined && isStatefulAdapter(adapter)) adapter.forget?.(envelope.id);
            letGo = true;
            parked.entry.resolve({ kind: "settle", status: MessageStatus.PENDING });
          } finally {
            batch.mutex.release();
          }
        });
        // A delivery an emitted batch took is part of that batch's output: it waits for the batch's
        // outcome and records it, keeping its claim meanwhile; the broker's redelivery of the
        // message is then a duplicate, or runs again if the batch failed.
      };
      runtime.deliveries.park(envelope.id, delivery.attempt);
      const unwatch = signal.onCancel(release);
      const unwatchLost = signal.onLost(release);
      if (trace !== undefined) this.#heldTraces.set(envelope.id, contextOf(trace.delivery));
      const fate = await parked.fate;
      runtime.deliveries.unpark(envelope.id);
      this.#heldTraces.delete(envelope.id);
      unwatch();
      unwatchLost();
      this.counters.held--;
      this.counters.inFlight++;
      runtime.onActivity();
      if (fate.kind === "settle") {
        if (letGo) {
          recordAbandoned(runtime, run, parked.adapterIndex, parked.entry.rowId);
          throw new DeliveryAbandoned("held delivery cancelled");
        }
        return this.#settle(delivery, fate.status, fate.error);
      }
      for (const message of fate.result.emitMessages ?? [])
        run.emitted.push({ message, parentRowId: parked.entry.rowId });
      run.followers.push(...fate.followers);
      outcome = await runChain(runtime, run, fate.result.data, parked.adapterIndex + 1, parked.entry.rowId);
    }
    return this.#complete(delivery, run, outcome);
  }

  /** A delivery whose handling threw: a timeout, a cancellation (back to pending) or a failure. */
  #failed(delivery: Delivery, run: ChainRun, providerSignal: AbortSignal, error: unknown): HandlerResult {
    const runtime = this.#runtime;
    const envelope = delivery.message;
    if (isHandlerTimeout(providerSignal.reason)) {
      // The provider counts a timeout as an attempt (retried with backoff, dead-lettered as
      // `incomplete` after the budget): record it the same way, so the row closes on the last one.
      for (const follower of run.followers)
        follower.resolve({ kind: "settle", status: MessageStatus.PENDING });
      const reason = providerSignal.reason;
      return this.#settle(delivery, MessageStatus.FAILED, {
        class: "HandlerTimeout",
        message: reason.message,
        retryable: true,
        fatal: false,
      });
    }
    if (run.signal.aborted || error instanceof DeliveryAbandoned) {
      this.#unmarked.delete(envelope.id);
      // Back to pending: the broker redelivers it (to this process or another one).
      runtime.lineage.update(envelope.id, { status: "pending", attempt: delivery.attempt });
      this.counters.abandoned++;
      for (const follower of run.followers)
        follower.resolve({ kind: "settle", status: MessageStatus.PENDING });
      return MessageStatus.PENDING;
    }
    const info = errorInfoOf(error);
    runtime.logger.error("route handler failed", {
      route: this.name,
      messageId: envelope.id,
      error: info.message,
    });
    return this.#settleAll(delivery, run, MessageStatus.FAILED, info);
  }

  #complete(
    delivery: Delivery,
    run: ChainRun,
    outcome: ChainOutcome,
  ): Promise<HandlerResult> | HandlerResult {
    if (run.trace !== undefined && run.followers.length > 0) {
      // Fan-in: the batch's other members settle with this delivery; link their spans.
      for (const follower of run.followers) {
        const carrier = this.#heldTraces.get(follower.messageId);
        if (carrier !== undefined)
          run.trace.delivery.addLink(carrier, {
            [TraceAttribute.linkKind]: "batch-member",
            [TraceAttribute.messageId]: follower.messageId,
          });
      }
      run.trace.delivery.setAttributes({ [TraceAttribute.batchMembers]: run.followers.length + 1 });
    }
    if (outcome.kind === "failed") {
      const error = outcome.error;
      const status = error.fatal || !error.retryable ? MessageStatus.REJECTED : MessageStatus.FAILED;
      if (error.fatal)
        this.#runtime.onFatal(new FatalAdapterError(this.name, outcome.adapter, error.message));
      return this.#settleAll(delivery, run, status, error);
    }
    if (outcome.kind !== "done") return this.#settleAll(delivery, run, MessageStatus.ACKNOWLEDGED);
    let published: Promise<number> | number;
    try {
      published = publishOutputs(this.#runtime, {
        route: this.name,
        outbound: this.#options.route.outbound,
        envelope: delivery.message,
        redelivered: delivery.redelivered,
        firstRun: this.#isFirstRun(delivery, run),
        data: outcome.data,
        lastRowId: outcome.lastRowId,
        emitted: run.emitted,
        watermark: this.#watermark,
        maxFanoutPending: this.#options.maxFanoutPending,
        batchMembers: run.followers.length === 0 ? undefined : run.followers.map((f) => f.messageId),
        trace: run.trace,
      });
    } catch (error) {
      return this.#publishFailed(delivery, run, error);
    }
    if (typeof published === "number") {
      this.counters.published += published;
      return this.#settleAll(delivery, run, MessageStatus.ACKNOWLEDGED);
    }
    this.#publishing++;
    return published.then(
      (count) => {
        this.#publishing--;
        this.counters.published += count;
        return this.#settleAll(delivery, run, MessageStatus.ACKNOWLEDGED);
      },
      (error: unknown) => {
        this.#publishing--;
        return this.#publishFailed(delivery, run, error);
      },
    );
  }

  /**
   * True when this delivery is its message's first run: every way a message runs again (a retry, a
   * broker redelivery, a copy re-seeded by `resume` and its original, a batch emitted again) shows
   * in the attempt, the broker's flag, the re-seed header or set, or batch members.
   */
  #isFirstRun(delivery: Delivery, run: ChainRun): boolean {
    return (
      delivery.attempt === 1 &&
      !delivery.redelivered &&
      run.followers.length === 0 &&
      !isReseeded(delivery.message) &&
      !this.#runtime.reseeded.has(delivery.message.id)
    );
  }

  /** A publish of the chain's outputs failed: the delivery fails (and is retried), unless cancelled. */
  #publishFailed(delivery: Delivery, run: ChainRun, error: unknown): HandlerResult {
    if (run.signal.aborted) throw error;
    return this.#settleAll(delivery, run, MessageStatus.FAILED, errorInfoOf(error, { retryable: true }));
  }

  /** Settles the delivery and the batch members it carries the same way. */
  #settleAll(
    delivery: Delivery,
    run: ChainRun,
    status: MessageStatus,
    error?: LineageErrorInfo,
  ): HandlerResult {
    for (const follower of run.followers)
      follower.resolve({ kind: "settle", status, ...(error ? { error } : {}) });
    return this.#settle(delivery, status, error);
  }

  /**
   * The provider's verdict on a delivery of this route. A dead letter closes the row of a FAILED or
   * incomplete delivery as `failed` (whatever made it the last attempt: the retry budget, a handler
   * that threw or timed out, a topic delivery); a retry or hand-back leaves it open for the next
   * delivery. Verdicts of deliveries this route did not leave open are ignored.
   */
  #verdict(settled: SettledDelivery): void {
    const id = settled.messageId;
    if (id === undefined) return;
    let awaiting = this.#awaitingVerdict.get(id);
    if (settled.kind !== "dead-lettered") {
      // A provider reports a retry once its copy is confirmed, and the copy may be delivered, run and
      // fail before that: a late report of an earlier attempt must leave the later attempt's entry
      // waiting for its own verdict.
      if (awaiting !== undefined && awaiting.attempt <= settled.attempt) this.#awaitingVerdict.delete(id);
      return;
    }
    this.#awaitingVerdict.delete(id);
    // An entry of an earlier attempt (its verdict came before its handler returned) is stale. In-place
    // retries of ordered groups run later attempts than the broker's, so only an older one is stale.
    if (awaiting !== undefined && awaiting.attempt < settled.attempt) awaiting = undefined;
    if (awaiting === undefined) {
      // Only a handler past its timeout is settled by the provider before the handler returns: the
      // row is closed now, and whatever the handler returns later must not reopen it.
      if (settled.reason !== "incomplete") return;
      this.#closedByVerdict.add(id);
    }
    const error = awaiting?.error ?? {
      class: awaiting === undefined ? "HandlerTimeout" : "DeliveryIncomplete",
      message: settled.lastError,
      retryable: awaiting === undefined,
      fatal: false,
    };
    const attempt = awaiting?.attempt ?? settled.attempt;
    this.#runtime.lineage.update(id, { status: "failed", finishedAt: nowIso(), attempt, error });
    this.#runtime.deliveries.settle(id, "failed", attempt);
    this.#runtime.onSettled();
  }

  /**
   * Records the delivery's outcome in its message row. ACKNOWLEDGED and REJECTED close it (the
   * provider always acks the one and dead-letters the other). A FAILED or incomplete delivery leaves
   * it open (`pending`): whether a retry follows or the message was dead-lettered is the provider's
   * verdict, which closes the row when it reports a dead letter (see {@link #verdict}).
   */
  #settle(delivery: Delivery, status: MessageStatus, error?: LineageErrorInfo): HandlerResult {
    const lineage = this.#runtime.lineage;
    const id = delivery.message.id;
    if (this.#closedByVerdict.delete(id)) {
      // Dead-lettered while the handler still ran (its timeout): the provider ignores this result.
      this.#unmarked.delete(id);
      this.counters.abandoned++;
      return status;
    }
    // The final update must follow any `processing` mark, never precede it.
    this.#unmarked.delete(id);
    const finishedAt = nowIso();
    // Every final status carries the attempt: the row may never have been marked `processing`.
    const attempt = delivery.attempt;
    const withError = error === undefined ? {} : { error };
    const ledger = this.#runtime.deliveries;
    // A result of this attempt supersedes what an earlier one left waiting for a verdict: an ordered
    // group retries in place, so a message that failed may be acknowledged or rejected before the
    // provider reports anything, and that later report must not reopen or re-close its row.
    this.#awaitingVerdict.delete(id);
    if (status === MessageStatus.ACKNOWLEDGED) {
      lineage.update(id, { status: "completed", finishedAt, attempt });
      ledger.settle(id, "completed", attempt);
      this.counters.acknowledged++;
    } else if (status === MessageStatus.REJECTED) {
      lineage.update(id, { status: "failed", finishedAt, attempt, ...withError });
      ledger.settle(id, "failed", attempt);
      this.counters.rejected++;
    } else if (status === MessageStatus.FAILED) {
      // Open until the provider's verdict: a retry (attempt + 1 is next) or a dead letter.
      lineage.update(id, { status: "pending", attempt: delivery.attempt + 1, ...withError });
      this.#awaitingVerdict.set(id, { attempt, ...withError });
      this.counters.failed++;
    } else {
      lineage.update(id, { status: "pending", attempt: delivery.attempt });
      // Dead-lettered `incomplete` if this was the last attempt; the provider's verdict says.
      this.#awaitingVerdict.set(id, { attempt });
      this.counters.abandoned++;
      return status;
    }
    this.#runtime.onSettled();
    return error === undefined ? status : { status, reason: error.message.slice(0, 500) };
  }
}

/** A FAILED or incomplete delivery whose row waits for the provider's verdict. */
interface AwaitingVerdict {
  readonly attempt: number;
  readonly error?: LineageErrorInfo;
}

/** One delivery's handling as it goes through {@link RouteProcessor}: what #end gives back. */
interface DeliveryWork {
  readonly delivery: Delivery;
  readonly providerSignal: AbortSignal;
  readonly run: ChainRun;
  /** 0: no slot held; 1: the execution's; 2: the execution's and the route's. */
  slots: number;
}

/** Subscribe attempts before a route gives up on a transient broker failure (about 6 s in all). */
const SUBSCRIBE_ATTEMPTS = 6;
const SUBSCRIBE_FIRST_DELAY_MS = 200;

/**
 * Subscribes, retrying a transient (retryable) provider failure with a doubling backoff: a broker
 * connection that drops while an execution's routes subscribe should delay its start, not fail it.
 */
async function subscribeWithRetry(
  subscribe: () => Promise<Subscription>,
  context: { route: string; logger: ExecutionRuntime["logger"]; signal: AbortSignal },
): Promise<Subscription> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await subscribe();
    } catch (error) {
      const retryable = isFactflowError(error) && error.retryable;
      if (!retryable || attempt >= SUBSCRIBE_ATTEMPTS || context.signal.aborted) throw error;
      const delayMs = SUBSCRIBE_FIRST_DELAY_MS * 2 ** (attempt - 1);
      context.logger.warn("route could not subscribe; retrying", {
        route: context.route,
        attempt,
        delayMs,
        error: (error as Error).message,
      });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}
