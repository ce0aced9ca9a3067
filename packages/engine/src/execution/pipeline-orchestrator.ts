import { setMaxListeners } from "node:events";
import { performance } from "node:perf_hooks";
import {
  type Adapter,
  type ExecutionStatus,
  type ExecutionStoreProtocol,
  type JsonValue,
  type LineageProtocol,
  type Logger,
  overrideInbound,
  type PipelineConfig,
  PipelineError,
  ProviderError,
  type QueueDefinition,
  type QueueDefinitionStoreProtocol,
  type QueueProtocol,
  type RecordedInput,
  type RetryConfig,
  type RouteConfig,
  resolveRetryPolicy,
  type StorageProtocol,
  type Tracer,
  type TraceSpan,
} from "@factflow/protocols";
import type { AdapterRegistry } from "../config/adapter-registry.js";
import { checkQueueCapabilities, routeQueueOptions } from "../config/route-queue-options.js";
import { DeliveryLedger } from "../delivery/delivery-ledger.js";
import { priorityRules, withPriorityStamp } from "../delivery/priority-stamp.js";
import { createRouteCondition, type RouteCondition } from "../delivery/route-condition.js";
import { RouteProcessor } from "../delivery/route-processor.js";
import { Semaphore } from "../delivery/semaphore.js";
import { withStepCondition } from "../delivery/step-condition.js";
import { newId } from "../ids.js";
import { LineageReconciler } from "../lineage/lineage-reconciler.js";
import { messageRow } from "../lineage/lineage-rows.js";
import { newRunId } from "../lineage/queued-row.js";
import type { ExecutionRuntime } from "../runtime.js";
import { diagnoseExecution, type StallDiagnosis } from "../stall/stall-diagnosis.js";
import { DEFAULT_STALL_AFTER_MS, StallWatch } from "../stall/stall-watch.js";
import { CompletionGate } from "./completion-gate.js";
import type { ExecutionEventType } from "./execution-events.js";
import type { ExecutionProgress } from "./execution-progress.js";
import { ExecutionScopedQueue } from "./execution-scoped-queue.js";
import { publishReseed, type ReseedMessage } from "./reseed.js";
import { endExecutionSpan, startExecutionSpan } from "./tracing-execution.js";

/** What starts the message flow of an execution. */
export type ExecutionSeed =
  /** Publish the config's init message (or `input` when given) to the init route. */
  | { readonly kind: "init"; readonly input?: JsonValue | null }
  /** Replay: publish recorded inputs to `route`. */
  | { readonly kind: "inputs"; readonly route: string; readonly inputs: readonly RecordedInput[] }
  /** Resume after a restart: publish nothing; the broker still holds the messages. */
  | { readonly kind: "none" }
  /**
   * Resume after a process death: re-publish the still-open message rows under their own ids,
   * marked re-seeded, so a message whose `completed` update was lost with the process runs (or is
   * found settled) instead of keeping the execution open for ever.
   */
  | { readonly kind: "reseed"; readonly messages: readonly ReseedMessage[] };

/** The shared services an orchestrator runs on. */
export interface OrchestratorServices {
  readonly queue: QueueProtocol;
  readonly lineage: LineageProtocol;
  readonly executions: ExecutionStoreProtocol;
  readonly storage: StorageProtocol;
  readonly registry: AdapterRegistry;
  readonly logger: Logger;
  /**
   * Register every outbound message durably (`registerPending`) before publishing it, not only
   * fan-out children. Needed when several processes consume one execution's queues. @default true
   */
  readonly strictLineage?: boolean;
  /** Queued lineage writes above which a handler waits for room (the batch in flight to commit) before publishing. @default 4000 */
  readonly maxLineageBacklog?: number;
  /**
   * A delivery's message row is marked `processing` once it has been in flight this long (checked by
   * one sweep per route); quicker deliveries go straight to their final status. @default 100
   */
  readonly processingMarkMs?: number;
  /**
   * Message ids per execution remembered as settled for good, so a broker redelivery of one is
   * acknowledged without running its route again (older ids fall back to a lineage read, and only
   * for deliveries the broker flags as redelivered). @default 50000
   */
  readonly settledMemory?: number;
  /**
   * How long an execution may sit idle with open lineage rows and nothing on the broker before the
   * rows are reconciled (closed as settled, or failed as lost). @default twice the longest retry
   * delay of its routes, at least 30 s
   */
  readonly reconcileAfterMs?: number;
  /**
   * Named queue definitions kept by the application: they override the settings of the routes
   * reading those queues when the execution starts, and changes reach the running routes.
   */
  readonly queueDefinitions?: QueueDefinitionStoreProtocol;
  /** Traces the execution and every delivery (docs/observability.md). @default no tracing */
  readonly tracer?: Tracer;
  /**
   * A running execution that makes no progress for this long is diagnosed as stalled (once per
   * stall, see `onStall`); 0 turns the check off (progress is still tracked). @default 30000
   */
  readonly stallAfterMs?: number;
  /**
   * Other processes consume the executions' queues too (cluster mode): a stall is only reported
   * once lineage has not changed either. @default false
   */
  readonly shared?: boolean;
}

export interface PipelineOrchestratorOptions extends OrchestratorServices {
  readonly executionId: string;
  readonly config: PipelineConfig;
  readonly seed: ExecutionSeed;
  readonly emit: (type: ExecutionEventType, data: Record<string, JsonValue>) => void;
  /** Interval of `route_progress` events, in ms. @default 500 */
  readonly progressIntervalMs?: number;
  /**
   * Joined an execution another server started (cluster mode): a failed start stops this
   * orchestrator without failing the execution. @default false
   */
  readonly participant?: boolean;
  /** Told once per stall what the execution waits for (see `stallAfterMs`). */
  readonly onStall?: (diagnosis: StallDiagnosis) => void;
}

/** How an orchestrator ended: a final status, or `stopped` (shut down, the execution left running). */
export type OrchestratorEnd = Exclude<ExecutionStatus, "running"> | "stopped";

/**
 * Runs one execution: subscribes every route, then publishes the seed; watches the completion gate;
 * ends in the order stop subscriptions → mark the execution row → emit the final event.
 */
export class PipelineOrchestrator {
  readonly executionId: string;
  readonly processors: RouteProcessor[] = [];
  /** Resolves once the orchestrator has ended. */
  readonly done: Promise<OrchestratorEnd>;
  readonly #options: PipelineOrchestratorOptions;
  readonly #abort = new AbortController();
  readonly #adapters: Adapter[] = [];
  readonly #conditions: RouteCondition[] = [];
  /** The config with the application's queue definitions applied (see `queueDefinitions`). */
  #config: PipelineConfig;
  #stopListening: (() => void) | undefined;
  #resolveDone!: (end: OrchestratorEnd) => void;
  #gate: CompletionGate | undefined;
  #ending = false;
  #lastSettled = 0;
  #progressTimer: NodeJS.Timeout | undefined;
  #lastProgress = "";
  /** Message ids settled here (the ledger every route of the execution shares). */
  readonly #deliveries: DeliveryLedger;
  /** Ids re-published by a resume or a cluster takeover: deliveries of them read lineage first. */
  readonly #reseeded: Set<string>;
  /** The execution's span, when traced: the parent of the deliveries of its seed messages. */
  #span: TraceSpan | undefined;
  /** Bumped by every delivery that starts, parks or settles: what the stall watch samples. */
  #ticks = 0;
  /** Seed messages not yet confirmed by the broker. */
  #seedPending = 0;
  /** Every route subscribed and the seed published. */
  #running = false;
  /** Joined, then taken over (cluster mode): the completion gate polls as the owner's does. */
  #owned = false;
  readonly #watch: StallWatch;

  constructor(options: PipelineOrchestratorOptions) {
    this.#options = options;
    this.#config = options.config;
    this.executionId = options.executionId;
    // Every in-flight delivery listens on the execution's signal; that is not a leak.
    setMaxListeners(0, this.#abort.signal);
    this.#deliveries = new DeliveryLedger(options.settledMemory);
    this.#reseeded = new Set(options.seed.kind === "reseed" ? options.seed.messages.map((m) => m.id) : []);
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    this.#watch = new StallWatch({
      afterMs: options.stallAfterMs ?? DEFAULT_STALL_AFTER_MS,
      shared: options.shared === true || options.participant === true,
      sample: () => {
        let sample = this.#ticks;
        // Duplicates and skipped messages are acknowledged without the callbacks that bump #ticks.
        for (const p of this.processors)
          sample += p.publishesDone + p.counters.duplicates + p.counters.skipped;
        return sample;
      },
      diagnose: () => this.diagnose(),
      onStall: (diagnosis) => options.onStall?.(diagnosis),
      onResume: (quietMs) =>
        options.logger.info("execution is making progress again", {
          executionId: options.executionId,
          quietMs: Math.round(quietMs),
        }),
    });
  }

  async start(): Promise<void> {
    const { executionId, tracer } = this.#options;
    if (tracer !== undefined)
      this.#span = startExecutionSpan(tracer, executionId, this.#options.config, this.#options.seed.kind);
    const definitions = this.#options.queueDefinitions;
    const startDefinitions = await definitions?.all();
    const config = withQueueDefinitions(this.#options.config, startDefinitions);
    this.#config = config;
    const logger = this.#options.logger.child({ executionId });
    const queue = new ExecutionScopedQueue(this.#options.queue, executionId);
    const routeOfQueue = new Map(Object.entries(config.routes).map(([name, r]) => [r.inbound.queue, name]));
    const runtime: ExecutionRuntime = {
      executionId,
      runId: newRunId(),
      // Queues whose route reads the priority from a payload field or header get it stamped on publish.
      queue: withPriorityStamp(queue, priorityRules(config)),
      lineage: this.#options.lineage,
      storage: this.#options.storage,
      logger,
      globalSlots: new Semaphore(config.settings.max_handlers),
      deliveries: this.#deliveries,
      reseeded: this.#reseeded,
      signal: this.#abort.signal,
      strictLineage: this.#options.strictLineage ?? true,
      maxLineageBacklog: this.#options.maxLineageBacklog ?? 4000,
      routeForQueue: (q) => routeOfQueue.get(q),
      onActivity: () => {
        this.#ticks++;
        this.#gate?.activity();
      },
      onMaybeIdle: () => {
        this.#ticks++;
        this.#gate?.trigger();
      },
      onFatal: (error) => {
        // Close the gate now: the rejected delivery must not let the execution "complete" first.
        this.#gate?.close();
        setImmediate(() => void this.#end("failed", error.message));
      },
      onSettled: () => {
        this.#ticks++;
        this.#lastSettled = performance.now();
      },
    };
    // From here on: a start that hangs (a subscribe, the seed's publish) is diagnosed too.
    this.#watch.start();
    try {
      const provider = this.#options.queue;
      const unsupported = checkQueueCapabilities(config, provider.capabilities, provider.name);
      if (unsupported.length > 0) {
        throw new PipelineError(
          "invalid_argument",
          `[factflow/engine] ${unsupported.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
        );
      }
      // A snapshot resumed or replayed in a fresh process may name user modules not loaded yet.
      const failures = await this.#options.registry.loadModules(config.adapter_modules);
      if (failures.length > 0) {
        throw new PipelineError(
          "unknown_adapter",
          `[factflow/engine] ${failures.map((f) => f.message).join("; ")}`,
        );
      }
      for (const [name, route] of Object.entries(config.routes)) {
        const adapters: Adapter[] = [];
        for (const spec of route.adapters) {
          const context = {
            logger: logger.child({ route: name, adapter: spec.type }),
            executionId,
            route: name,
          };
          const adapter = await this.#options.registry.create(
            spec.type,
            spec.config as Record<string, JsonValue>,
            context,
          );
          adapters.push(
            spec.condition === undefined
              ? adapter
              : await withStepCondition(adapter, spec.condition, this.#options.registry, context),
          );
        }
        this.#adapters.push(...adapters);
        const condition =
          route.condition === undefined
            ? undefined
            : await createRouteCondition(route.condition, this.#options.registry, {
                logger: logger.child({ route: name, condition: true }),
                executionId,
                route: name,
              });
        if (condition !== undefined) this.#conditions.push(condition);
        this.processors.push(
          new RouteProcessor(runtime, {
            name,
            route,
            adapters,
            retry: toRetryPolicy(route.retry ?? config.settings.retry),
            maxFanoutPending: config.settings.max_fanout_pending,
            handlerTimeoutMs: config.settings.handler_timeout_ms,
            queueOptions: routeQueueOptions(route, config.settings.handler_timeout_ms),
            ...(condition === undefined ? {} : { condition }),
            ...(tracer === undefined ? {} : { tracer }),
            ...(this.#options.processingMarkMs === undefined
              ? {}
              : { processingMarkMs: this.#options.processingMarkMs }),
          }),
        );
      }
      const routeSpecs = Object.values(config.routes);
      const destinations = routeSpecs.map((r) => queue.scope(`/queue/${r.inbound.queue}`));
      const admin = this.#options.queue.admin;
      const longestDelay = Math.max(
        ...routeSpecs.map((r) => toRetryPolicy(r.retry ?? config.settings.retry).maxDelayMs),
      );
      this.#gate = new CompletionGate({
        executionId,
        processors: this.processors,
        lineage: this.#options.lineage,
        logger,
        onComplete: () => void this.#end("completed"),
        // A server that joined (cluster mode) polls only while it holds work of the execution (the
        // owner polls on), and waits until the creator has registered the seed.
        ...(this.#options.participant === true
          ? {
              pollOnlyWhileBusy: !this.#owned,
              seeded: async () =>
                (await this.#options.lineage.rows(executionId, { offset: 0, limit: 1 })).items.length > 0,
            }
          : {}),
        queuesDrained: async () => {
          for (const destination of destinations) {
            try {
              const stats = await admin.stats({ destination });
              if (stats.depth + stats.inFlight > 0) return false;
            } catch (error) {
              // A queue that does not exist holds nothing.
              if (!(error instanceof ProviderError && error.reason === "not-found")) throw error;
            }
          }
          return true;
        },
        reconciler: new LineageReconciler({
          executionId,
          lineage: this.#options.lineage,
          deliveries: runtime.deliveries,
          queue: this.#options.queue,
          destinations,
          afterMs: this.#options.reconcileAfterMs ?? Math.max(30_000, 2 * longestDelay),
          logger,
        }),
      });
      // Every route subscribed before anything is published: nothing is sent to a queue nobody reads.
      for (const processor of this.processors) await processor.start();
      const applyDefinition = async (name: string, definition: QueueDefinition): Promise<void> => {
        const original = Object.values(this.#options.config.routes).find((r) => r.inbound.queue === name);
        if (original === undefined) return;
        await this.reconfigureQueue(
          name,
          overrideInbound(original.inbound, definition),
          definition.retry ?? original.retry,
        );
      };
      this.#stopListening = definitions?.onChange(applyDefinition);
      // A definition changed between the first read and the listener (another server's PUT) would
      // otherwise reach this execution only with the next change: read again and apply what moved.
      if (definitions !== undefined) {
        for (const [name, definition] of await definitions.all()) {
          if (JSON.stringify(definition) !== JSON.stringify(startDefinitions?.get(name))) {
            await applyDefinition(name, definition);
          }
        }
      }
      await this.#publishSeed(queue, routeOfQueue, runtime);
    } catch (error) {
      await this.#end(this.#options.participant === true ? "stopped" : "failed", (error as Error).message);
      throw error;
    }
    this.#progressTimer = setInterval(() => this.#emitProgress(), this.#options.progressIntervalMs ?? 500);
    this.#progressTimer.unref();
    this.#running = true;
    this.#gate.start();
  }

  /** When the execution last made progress and what each route is doing (memory only, cheap). */
  progress(): ExecutionProgress {
    const quietMs = Math.round(this.#watch.quietMs());
    return {
      executionId: this.executionId,
      phase: this.#running ? "running" : "starting",
      lastProgressAt: new Date(Date.now() - quietMs).toISOString(),
      quietMs,
      seedPending: this.#seedPending,
      routes: this.processors.map((p) => p.activity()),
    };
  }

  /**
   * What the execution is waiting for: {@link progress} plus what lineage and the broker hold for
   * each route (each read bounded to a few seconds; a read that fails is named in `problems`).
   */
  diagnose(): Promise<StallDiagnosis> {
    return diagnoseExecution(this.progress(), { lineage: this.#options.lineage, queue: this.#options.queue });
  }

  /** The stall being reported (no progress for `stallAfterMs`), or undefined while it progresses. */
  stall(): StallDiagnosis | undefined {
    return this.#watch.current();
  }

  /** True for a message this process has settled for good. */
  settled = (messageId: string): boolean => this.#deliveries.settled(messageId) !== undefined;

  /** Marks messages re-published by a takeover: an original of one arriving here reads lineage first. */
  /** Lineage of this execution changed outside its deliveries (cluster takeover): check completion now. */
  nudgeCompletion(): void {
    this.#gate?.nudge();
  }

  /**
   * True when this process owns the execution: it started it (create, replay, resume), or it joined
   * it and `own` was called since. The owner cleans the execution's queues when it ends.
   */
  get owner(): boolean {
    return this.#options.participant !== true || this.#owned;
  }

  /**
   * This server owns the execution it joined (it took it over): its completion gate polls from now
   * on whether or not work is held here, as the creator's does. Idempotent.
   */
  own(): void {
    if (this.#owned) return;
    this.#owned = true;
    this.#gate?.pollAlways();
  }

  markReseeded(messageIds: Iterable<string>): void {
    for (const id of messageIds) this.#reseeded.add(id);
  }

  /** Stops the execution and marks it cancelled. */
  cancel(reason = "cancelled"): Promise<OrchestratorEnd> {
    return this.#end("cancelled", reason);
  }

  /** Stops the execution and marks it failed with `error`. */
  fail(error: string): Promise<OrchestratorEnd> {
    return this.#end("failed", error);
  }

  /** Stops consuming without finishing the execution row (server shutdown; `resume` continues it). */
  stop(): Promise<OrchestratorEnd> {
    return this.#end("stopped");
  }

  /**
   * Applies changed queue settings to the route consuming `queue` (a runtime queue definition
   * change): it re-subscribes with them, or pauses at `concurrency: 0`. Resolves once the new
   * consumer is subscribed. False when no route of this execution reads that queue.
   */
  async reconfigureQueue(
    queueName: string,
    inbound: RouteConfig["inbound"],
    retry?: RouteConfig["retry"],
  ): Promise<boolean> {
    const entry = Object.entries(this.#config.routes).find(([, r]) => r.inbound.queue === queueName);
    const processor = entry === undefined ? undefined : this.processors.find((p) => p.name === entry[0]);
    if (entry === undefined || processor === undefined || this.#ending) return false;
    const [name, previous] = entry;
    const route: RouteConfig = { ...previous, inbound, ...(retry === undefined ? {} : { retry }) };
    const config = this.#config;
    const timeout = config.settings.handler_timeout_ms;
    const provider = this.#options.queue;
    const unsupported = checkQueueCapabilities(
      { ...config, routes: { [name]: route } },
      provider.capabilities,
      provider.name,
    );
    if (unsupported.length > 0) {
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] ${unsupported.map((i) => i.message).join("; ")}`,
      );
    }
    const policyOf = (r: RouteConfig) => toRetryPolicy(r.retry ?? config.settings.retry);
    try {
      await processor.reconfigure(route, routeQueueOptions(route, timeout), policyOf(route));
    } catch (error) {
      // Back to what ran before (e.g. the broker refused a changed max_priority), then report it.
      await processor
        .reconfigure(previous, routeQueueOptions(previous, timeout), policyOf(previous))
        .catch(() => undefined);
      throw error;
    }
    this.#config = { ...config, routes: { ...config.routes, [name]: route } };
    return true;
  }

  /** Per-route counters. */
  counters(): Record<string, Record<string, number>> {
    return Object.fromEntries(this.processors.map((p) => [p.name, { ...p.counters }]));
  }

  async #publishSeed(
    queue: ExecutionScopedQueue,
    routeOfQueue: Map<string, string>,
    runtime: ExecutionRuntime,
  ): Promise<void> {
    const { config, seed, lineage, executionId } = this.#options;
    if (seed.kind === "none") return;
    if (seed.kind === "reseed") {
      const deliveries = runtime.deliveries;
      // Re-seeded messages keep the trace context they were first published with.
      this.#seedPending = seed.messages.length;
      await publishReseed(queue, config, seed.messages, this.#options.logger.child({ executionId }), {
        settled: (id) => deliveries.settled(id) !== undefined,
        signal: this.#abort.signal,
        onDone: () => {
          this.#seedPending--;
          this.#ticks++;
        },
      });
      this.#seedPending = 0;
      return;
    }
    const route = seed.kind === "init" ? config.init.route : seed.route;
    const routeConfig = config.routes[route];
    if (routeConfig === undefined) {
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] route "${route}" is not in the config of execution ${executionId}`,
      );
    }
    const messages =
      seed.kind === "init"
        ? [
            {
              id: newId(),
              correlationId: undefined,
              body: (seed.input ?? config.init.message ?? {}) as JsonValue,
            },
          ]
        : seed.inputs.map((input) => ({
            id: newId(),
            correlationId: input.correlationId,
            body: input.payload,
          }));
    const rows = messages.map((m) =>
      messageRow({
        executionId,
        route: routeOfQueue.get(routeConfig.inbound.queue) ?? route,
        messageId: m.id,
        correlationId: m.correlationId ?? m.id,
        payload: m.body,
      }),
    );
    await lineage.registerPending(rows);
    const trace: Record<string, string> = {};
    this.#span?.inject(trace);
    const { traceparent, ...traceHeaders } = trace;
    this.#seedPending = messages.length;
    for (const m of messages) {
      await queue.publish(`/queue/${routeConfig.inbound.queue}`, {
        id: m.id,
        body: m.body,
        ...(m.correlationId === undefined ? {} : { correlationId: m.correlationId }),
        ...(traceparent === undefined ? {} : { traceparent }),
        ...(Object.keys(traceHeaders).length === 0 ? {} : { headers: traceHeaders }),
      });
      this.#seedPending--;
      this.#ticks++;
    }
  }

  #emitProgress(force = false): void {
    const routes = this.counters();
    const snapshot = JSON.stringify(routes);
    if (!force && snapshot === this.#lastProgress) return;
    this.#lastProgress = snapshot;
    this.#options.emit("route_progress", { routes });
  }

  async #end(requested: OrchestratorEnd, requestedError?: string): Promise<OrchestratorEnd> {
    if (this.#ending) return this.done;
    // What the row says in the end: another server may have ended the execution first.
    let end = requested;
    let error = requestedError;
    this.#ending = true;
    const idleAt = performance.now();
    this.#watch.stop();
    this.#gate?.close();
    this.#stopListening?.();
    clearInterval(this.#progressTimer);
    const { executions, lineage, logger, executionId } = this.#options;
    // 1. Stop subscriptions first, so the names are free and nothing more is consumed.
    await Promise.allSettled(this.processors.map((p) => p.stop()));
    this.#abort.abort(new PipelineError("cancelled", `[factflow/engine] execution ${executionId} ${end}`));
    await Promise.allSettled(this.#adapters.map(async (a) => a.close?.()));
    await Promise.allSettled(this.#conditions.map(async (c) => c.close?.()));
    if (end !== "stopped") {
      await lineage.flush().catch(() => undefined);
      const counters: Record<string, number> = {};
      for (const [route, values] of Object.entries(this.counters())) {
        for (const [key, value] of Object.entries(values))
          if (key !== "inFlight" && key !== "held") counters[`${route}.${key}`] = value;
      }
      // 2. Then the row, 3. then the event.
      try {
        const won = await executions.finishExecution(executionId, end, {
          ...(error === undefined ? {} : { error }),
          counters,
        });
        // Several servers may see the end at once (cluster mode): the row took the first one only,
        // and that is what every server reports.
        if (won === false) {
          const row = await executions.getExecution(executionId, { includeInput: false });
          if (row !== undefined && row.status !== "running") {
            end = row.status;
            error = row.error ?? undefined;
          }
        }
      } catch (storeError) {
        logger.error("could not record the end of the execution", {
          executionId,
          error: (storeError as Error).message,
        });
      }
      this.#emitProgress(true);
      const ms = (t: number) => Math.round((t - this.#lastSettled) * 100) / 100;
      this.#options.emit(end, {
        ...(error === undefined ? {} : { error }),
        counters,
        // Last settled delivery → gate fired, and → this event (after unsubscribe and the row update).
        ...(this.#lastSettled > 0
          ? { gateDelayMs: ms(idleAt), completionDelayMs: ms(performance.now()) }
          : {}),
      });
    }
    if (this.#span !== undefined) endExecutionSpan(this.#span, end, error);
    this.#resolveDone(end);
    return end;
  }
}

/** The config with stored queue definitions laid over the routes that read those queues. */
function withQueueDefinitions(
  config: PipelineConfig,
  definitions: ReadonlyMap<string, QueueDefinition> | undefined,
): PipelineConfig {
  if (definitions === undefined || definitions.size === 0) return config;
  const routes: Record<string, RouteConfig> = {};
  for (const [name, route] of Object.entries(config.routes)) {
    const definition = definitions.get(route.inbound.queue);
    const retry = definition?.retry ?? route.retry;
    routes[name] =
      definition === undefined
        ? route
        : {
            ...route,
            inbound: overrideInbound(route.inbound, definition),
            ...(retry === undefined ? {} : { retry }),
          };
  }
  return { ...config, routes };
}

function toRetryPolicy(retry: RetryConfig) {
  return resolveRetryPolicy({
    maxAttempts: retry.max_attempts,
    initialDelayMs: retry.initial_delay_ms,
    multiplier: retry.multiplier,
    maxDelayMs: retry.max_delay_ms,
  });
}
