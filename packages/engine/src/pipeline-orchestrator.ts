import { setMaxListeners } from "node:events";
import { performance } from "node:perf_hooks";
import {
  type Adapter,
  type ExecutionStatus,
  type ExecutionStoreProtocol,
  type JsonValue,
  type LineageProtocol,
  type Logger,
  type PipelineConfig,
  PipelineError,
  ProviderError,
  type QueueProtocol,
  type RecordedInput,
  type RetryConfig,
  resolveRetryPolicy,
  type StorageProtocol,
} from "@factflow/protocols";
import type { AdapterRegistry } from "./adapter-registry.js";
import { CompletionGate } from "./completion-gate.js";
import { DeliveryLedger } from "./delivery-ledger.js";
import type { ExecutionEventType } from "./execution-events.js";
import { ExecutionScopedQueue } from "./execution-scoped-queue.js";
import { newId } from "./ids.js";
import { LineageReconciler } from "./lineage-reconciler.js";
import { messageRow } from "./lineage-rows.js";
import { publishReseed, type ReseedMessage } from "./reseed.js";
import { RouteProcessor } from "./route-processor.js";
import type { ExecutionRuntime } from "./runtime.js";
import { Semaphore } from "./semaphore.js";

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
  /** Queued lineage writes above which a handler waits for a flush before publishing. @default 1000 */
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
}

export interface PipelineOrchestratorOptions extends OrchestratorServices {
  readonly executionId: string;
  readonly config: PipelineConfig;
  readonly seed: ExecutionSeed;
  readonly emit: (type: ExecutionEventType, data: Record<string, JsonValue>) => void;
  /** Interval of `route_progress` events, in ms. @default 500 */
  readonly progressIntervalMs?: number;
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
  #resolveDone!: (end: OrchestratorEnd) => void;
  #gate: CompletionGate | undefined;
  #ending = false;
  #lastSettled = 0;
  #progressTimer: NodeJS.Timeout | undefined;
  #lastProgress = "";

  constructor(options: PipelineOrchestratorOptions) {
    this.#options = options;
    this.executionId = options.executionId;
    // Every in-flight delivery listens on the execution's signal; that is not a leak.
    setMaxListeners(0, this.#abort.signal);
    this.done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
  }

  async start(): Promise<void> {
    const { config, executionId } = this.#options;
    const logger = this.#options.logger.child({ executionId });
    const queue = new ExecutionScopedQueue(this.#options.queue, executionId);
    const routeOfQueue = new Map(Object.entries(config.routes).map(([name, r]) => [r.inbound.queue, name]));
    const runtime: ExecutionRuntime = {
      executionId,
      queue,
      lineage: this.#options.lineage,
      storage: this.#options.storage,
      logger,
      globalSlots: new Semaphore(config.settings.max_handlers),
      deliveries: new DeliveryLedger(this.#options.settledMemory),
      reseeded: new Set(
        this.#options.seed.kind === "reseed" ? this.#options.seed.messages.map((m) => m.id) : [],
      ),
      signal: this.#abort.signal,
      strictLineage: this.#options.strictLineage ?? true,
      maxLineageBacklog: this.#options.maxLineageBacklog ?? 1000,
      routeForQueue: (q) => routeOfQueue.get(q),
      onActivity: () => this.#gate?.activity(),
      onMaybeIdle: () => this.#gate?.trigger(),
      onFatal: (error) => {
        // Close the gate now: the rejected delivery must not let the execution "complete" first.
        this.#gate?.close();
        setImmediate(() => void this.#end("failed", error.message));
      },
      onSettled: () => {
        this.#lastSettled = performance.now();
      },
    };
    try {
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
          adapters.push(
            await this.#options.registry.create(spec.type, spec.config as Record<string, JsonValue>, {
              logger: logger.child({ route: name, adapter: spec.type }),
              executionId,
              route: name,
            }),
          );
        }
        this.#adapters.push(...adapters);
        this.processors.push(
          new RouteProcessor(runtime, {
            name,
            route,
            adapters,
            retry: toRetryPolicy(route.retry ?? config.settings.retry),
            maxFanoutPending: config.settings.max_fanout_pending,
            handlerTimeoutMs: config.settings.handler_timeout_ms,
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
      await this.#publishSeed(queue, routeOfQueue, runtime);
    } catch (error) {
      await this.#end("failed", (error as Error).message);
      throw error;
    }
    this.#progressTimer = setInterval(() => this.#emitProgress(), this.#options.progressIntervalMs ?? 500);
    this.#progressTimer.unref();
    this.#gate.start();
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
      return publishReseed(queue, config, seed.messages, this.#options.logger.child({ executionId }), {
        settled: (id) => deliveries.settled(id) !== undefined,
        signal: this.#abort.signal,
      });
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
    for (const m of messages) {
      await queue.publish(`/queue/${routeConfig.inbound.queue}`, {
        id: m.id,
        body: m.body,
        ...(m.correlationId === undefined ? {} : { correlationId: m.correlationId }),
      });
    }
  }

  #emitProgress(force = false): void {
    const routes = this.counters();
    const snapshot = JSON.stringify(routes);
    if (!force && snapshot === this.#lastProgress) return;
    this.#lastProgress = snapshot;
    this.#options.emit("route_progress", { routes });
  }

  async #end(end: OrchestratorEnd, error?: string): Promise<OrchestratorEnd> {
    if (this.#ending) return this.done;
    this.#ending = true;
    const idleAt = performance.now();
    this.#gate?.close();
    clearInterval(this.#progressTimer);
    const { executions, lineage, logger, executionId } = this.#options;
    // 1. Stop subscriptions first, so the names are free and nothing more is consumed.
    await Promise.allSettled(this.processors.map((p) => p.stop()));
    this.#abort.abort(new PipelineError("cancelled", `[factflow/engine] execution ${executionId} ${end}`));
    await Promise.allSettled(this.#adapters.map(async (a) => a.close?.()));
    if (end !== "stopped") {
      await lineage.flush().catch(() => undefined);
      const counters: Record<string, number> = {};
      for (const [route, values] of Object.entries(this.counters())) {
        for (const [key, value] of Object.entries(values))
          if (key !== "inFlight" && key !== "held") counters[`${route}.${key}`] = value;
      }
      // 2. Then the row, 3. then the event.
      try {
        await executions.finishExecution(executionId, end, {
          ...(error === undefined ? {} : { error }),
          counters,
        });
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
    this.#resolveDone(end);
    return end;
  }
}

function toRetryPolicy(retry: RetryConfig) {
  return resolveRetryPolicy({
    maxAttempts: retry.max_attempts,
    initialDelayMs: retry.initial_delay_ms,
    multiplier: retry.multiplier,
    maxDelayMs: retry.max_delay_ms,
  });
}
