import {
  type AdapterDefinition,
  type ExecutionStoreProtocol,
  type LineageProtocol,
  type Logger,
  type QueueDefinitionStoreProtocol,
  type QueueProtocol,
  type StorageProtocol,
  silentLogger,
  type Tracer,
} from "@factflow/protocols";
import {
  type AdapterRegistry,
  createAdapterRegistry,
  type ModuleImporter,
} from "./config/adapter-registry.js";
import type { ModuleAccess } from "./config/module-access.js";
import { ClusterNode, type ClusterOptions } from "./execution/cluster-node.js";
import type { ExecutionHooks } from "./execution/execution-hooks.js";
import { ExecutionService } from "./execution/execution-service.js";
import { OrchestratorManager } from "./execution/orchestrator-manager.js";

export interface EngineOptions {
  /** A connected provider; the engine never connects or closes it. */
  readonly queue: QueueProtocol;
  readonly lineage: LineageProtocol;
  readonly executions: ExecutionStoreProtocol;
  readonly storage: StorageProtocol;
  /** Adapter definitions by type (e.g. the built-ins of `@factflow/adapters`). */
  readonly adapters?: readonly AdapterDefinition[];
  /**
   * Where a config's `adapter_modules` may be imported from, checked before every import (config
   * validation, start, resume, replay). @default NO_MODULE_ACCESS: no module is ever imported
   */
  readonly moduleAccess?: ModuleAccess;
  /** How an allowed adapter module is imported. @default the runtime's `import()` */
  readonly importModule?: ModuleImporter;
  /** @default silentLogger */
  readonly logger?: Logger;
  /** Executions running at once. @default 10 */
  readonly maxConcurrent?: number;
  /** Interval of `route_progress` events, in ms. @default 500 */
  readonly progressIntervalMs?: number;
  /**
   * Register every outbound message durably before publishing it (not only fan-out children), so a
   * consumer in another process always finds the row. Safe by default; an in-process provider (where
   * the publisher is always the consumer) may turn it off for throughput. @default true
   */
  readonly strictLineage?: boolean;
  /** Queued lineage writes above which a handler waits for room (the batch in flight to commit) before publishing. @default 4000 */
  readonly maxLineageBacklog?: number;
  /**
   * How long a delivery is in flight before its message row is marked `processing` (one sweep per
   * route). Quicker deliveries go straight from `pending` to their final status, saving a lineage
   * update each. @default 100
   */
  readonly processingMarkMs?: number;
  /**
   * Message ids per execution remembered as settled for good: a broker redelivery of one is
   * acknowledged without running its route again. Older ids, and ids settled by another process,
   * are recognised through a lineage read (only for deliveries flagged redelivered). @default 50000
   */
  readonly settledMemory?: number;
  /**
   * Told when each execution starts running in this process (its row exists, nothing published yet)
   * and when it stops (subscriptions stopped), e.g. to label metrics or delete its broker queues.
   * A hook that throws is logged and never breaks the execution. @default no hooks
   */
  readonly hooks?: ExecutionHooks;
  /**
   * How long an execution may sit idle with open lineage rows and nothing on the broker before its
   * rows are reconciled (a closing write was lost). @default twice its longest retry delay, ≥ 30 s
   */
  readonly reconcileAfterMs?: number;
  /** Named queue definitions that override routes' queue settings (see `OrchestratorServices`). */
  readonly queueDefinitions?: QueueDefinitionStoreProtocol;
  /**
   * Traces executions, deliveries and adapter invocations and carries the trace context in message
   * headers (docs/observability.md). @default no tracing: no span is created, no trace header read
   */
  readonly tracer?: Tracer;
  /**
   * A running execution that makes no progress for this long (no delivery starting, settling or
   * parking, no output published) is diagnosed as stalled: `hooks.onExecutionStalled` is told once
   * per stall what it waits for, and `service.stall(id)` returns it. 0 turns the check off;
   * `service.progress` and `service.diagnose` work either way. @default 30000
   */
  readonly stallAfterMs?: number;
  /**
   * Run as one server of several on a shared broker and PostgreSQL (docs/deployment.md): join every
   * running execution, take over after servers whose lease expired. Call `engine.cluster.start()`.
   * @default single process
   */
  readonly cluster?: ClusterOptions;
  /**
   * This process's lease on the database, recorded as the owner of each execution it creates or
   * replays, so no other process resumes one while the lease is live (docs/deployment.md).
   * @default `cluster.nodeId` in a cluster; else no owner is recorded
   */
  readonly nodeId?: string;
}

export interface Engine {
  readonly service: ExecutionService;
  readonly manager: OrchestratorManager;
  readonly registry: AdapterRegistry;
  /** This server's part in a cluster, when `EngineOptions.cluster` was given (not yet started). */
  readonly cluster?: ClusterNode;
  /**
   * Stops every running execution (rows stay `running` for `resume`, or are marked cancelled with
   * `{ cancel: true }`). Does not close the queue, lineage, store or storage: the caller owns them.
   */
  shutdown(options?: { cancel?: boolean }): Promise<void>;
}

/** Wires the engine on the services the application hands it. */
export function createEngine(options: EngineOptions): Engine {
  const logger = options.logger ?? silentLogger;
  const registry = createAdapterRegistry(options.adapters ?? [], {
    ...(options.moduleAccess === undefined ? {} : { moduleAccess: options.moduleAccess }),
    ...(options.importModule === undefined ? {} : { importModule: options.importModule }),
  });
  const manager = new OrchestratorManager({
    queue: options.queue,
    lineage: options.lineage,
    executions: options.executions,
    storage: options.storage,
    registry,
    logger,
    ...(options.maxConcurrent === undefined ? {} : { maxConcurrent: options.maxConcurrent }),
    ...(options.progressIntervalMs === undefined ? {} : { progressIntervalMs: options.progressIntervalMs }),
    ...(options.strictLineage === undefined ? {} : { strictLineage: options.strictLineage }),
    ...(options.maxLineageBacklog === undefined ? {} : { maxLineageBacklog: options.maxLineageBacklog }),
    ...(options.processingMarkMs === undefined ? {} : { processingMarkMs: options.processingMarkMs }),
    ...(options.settledMemory === undefined ? {} : { settledMemory: options.settledMemory }),
    ...(options.reconcileAfterMs === undefined ? {} : { reconcileAfterMs: options.reconcileAfterMs }),
    ...(options.hooks === undefined ? {} : { hooks: options.hooks }),
    ...(options.queueDefinitions === undefined ? {} : { queueDefinitions: options.queueDefinitions }),
    ...(options.tracer === undefined ? {} : { tracer: options.tracer }),
    ...(options.stallAfterMs === undefined ? {} : { stallAfterMs: options.stallAfterMs }),
    // Other servers consume the same executions: progress there is invisible to this one.
    ...(options.cluster === undefined ? {} : { shared: true }),
  });
  const nodeId = options.nodeId ?? options.cluster?.nodeId;
  const service = new ExecutionService({
    manager,
    executions: options.executions,
    lineage: options.lineage,
    logger,
    ...(nodeId === undefined ? {} : { nodeId }),
  });
  const cluster =
    options.cluster === undefined
      ? undefined
      : new ClusterNode(options.cluster, {
          service,
          manager,
          queue: options.queue,
          lineage: options.lineage,
          executions: options.executions,
          logger,
        });
  return {
    service,
    manager,
    registry,
    ...(cluster === undefined ? {} : { cluster }),
    async shutdown(shutdownOptions = {}) {
      await cluster?.stop();
      await manager.shutdown(shutdownOptions);
    },
  };
}
