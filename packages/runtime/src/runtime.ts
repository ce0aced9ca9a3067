import type { ExecutionProgress, StallDiagnosis } from "@factflow/engine";
import type {
  ExecutionRecord,
  ExecutionStoreProtocol,
  JsonValue,
  LineageProtocol,
  PipelineConfig,
  QueueProtocol,
  StorageProtocol,
} from "@factflow/protocols";
import type { ConfigCatalog } from "./config-catalog.js";
import type { FactflowMetrics } from "./metrics.js";
import type { QueueDefinitionStore } from "./queue-definition-store.js";
import type { RetentionJob } from "./retention.js";
import type { Settings } from "./settings.js";

/** One event of an execution's stream (SSE). Ids increase per execution. */
export interface RuntimeEvent {
  readonly id: number;
  readonly type: string;
  readonly data: unknown;
}

/** What the HTTP app and the CLI need from the engine. `compose.ts` adapts `@factflow/engine` to it. */
export interface EngineFacade {
  create(request: {
    config: PipelineConfig;
    configName: string;
    configVersion: number | null;
    input: JsonValue | null;
    /** The config file, so relative `adapter_modules` resolve. */
    configPath?: string;
  }): Promise<ExecutionRecord>;
  cancel(id: string): Promise<ExecutionRecord>;
  /** Continues an execution left `running` (after a restart); its messages are still on the broker. */
  resume(id: string): Promise<ExecutionRecord>;
  replay(
    id: string,
    request: { fromRoute: string; messageIds?: readonly string[] },
  ): Promise<ExecutionRecord>;
  /** Events after `afterId`, ending after the final one (completed, failed, cancelled). */
  events(id: string, options: { afterId: number; signal: AbortSignal }): AsyncIterable<RuntimeEvent>;
  /** Resolves with the final record. */
  waitForEnd(id: string): Promise<ExecutionRecord>;
  /** Executions running in this process. */
  active(): number;
  /** Stops an execution running here and marks it failed with `error`. */
  fail(id: string, error: string): Promise<ExecutionRecord>;
  /** When each execution running here last made progress, and what its routes are doing. */
  progress(): readonly ExecutionProgress[];
  /** What an execution running here waits for (bounded reads); undefined when it does not run here. */
  diagnose(id: string): Promise<StallDiagnosis | undefined>;
  /** The current stall of an execution running here (no progress for `stall_after_s`), if any. */
  stall(id: string): StallDiagnosis | undefined;
  /**
   * Ids of the executions running in this process. A `running` execution missing here was left
   * behind by a stopped server: the one case where `resume` does something.
   */
  runningHere(): readonly string[];
  shutdown(): Promise<void>;
}

/**
 * This process's lease on the database (docs/deployment.md): executions it creates, replays or
 * resumes are recorded as its own, and no other process resumes them while the lease is live.
 */
export interface ProcessOwnership {
  /** The lease's id in `factflow_nodes`, recorded as `owner_node`. */
  readonly nodeId: string;
  /** How long the lease lasts without renewal, in ms. */
  readonly leaseMs: number;
  /**
   * Makes this process the owner of a running execution unless a live process holds it; `owner`
   * says who holds it now (null when it is no longer running).
   */
  claim(executionId: string): Promise<{ claimed: boolean; owner: string | null }>;
}

/** Everything composed from settings; the HTTP app and the CLI use only this. */
export interface FactflowRuntime {
  readonly settings: Settings;
  readonly provider: QueueProtocol;
  readonly lineage: LineageProtocol;
  readonly executions: ExecutionStoreProtocol;
  readonly storage: StorageProtocol;
  readonly configs: ConfigCatalog;
  readonly metrics: FactflowMetrics;
  readonly engine: EngineFacade;
  /** Deletes old finished executions with their lineage (scheduled when `retention_days` > 0). */
  readonly retention: RetentionJob;
  /** The cleanup of ended executions' queues: `idle(id)` resolves when none is under way for `id`. */
  readonly queueCleanup?: { idle(executionId: string): Promise<void> };
  /**
   * Named queue definitions (`PUT /queues/{name}/definition`). Without it (a runtime composed
   * elsewhere, as some tests do) the routes use the file store of `settings.data_dir`.
   */
  readonly queueDefinitions?: QueueDefinitionStore;
  /** Absent when nothing is shared with other processes (`lineage: memory`). */
  readonly ownership?: ProcessOwnership;
  /** Validates YAML (schema, adapters, `adapter_modules`) as the engine will run it. */
  parseConfig(source: string, path: string, label?: string): Promise<PipelineConfig>;
  /** Stops executions, then closes provider and database. Idempotent. */
  close(): Promise<void>;
}
