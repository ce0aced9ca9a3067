import type { JsonValue } from "./json.js";
import type { PipelineConfig } from "./pipeline-config.js";

export type ExecutionStatus = "running" | "completed" | "failed" | "cancelled";

/** A stored pipeline config version. */
export interface StoredConfig {
  readonly name: string;
  readonly version: number;
  readonly source: string;
  readonly parsed: PipelineConfig;
  readonly createdAt: string;
}

/** One execution row. `configSnapshot` is frozen at creation and is what replay resolves routes from. */
export interface ExecutionRecord {
  /** UUIDv7. */
  readonly id: string;
  readonly configName: string;
  readonly configVersion: number | null;
  readonly status: ExecutionStatus;
  readonly configSnapshot: PipelineConfig;
  readonly input: JsonValue | null;
  readonly error: string | null;
  readonly parentExecutionId: string | null;
  /** For replays: the route the segment starts at. */
  readonly replayFromRoute: string | null;
  readonly createdAt: string;
  readonly finishedAt: string | null;
  /** Free-form counters (messages per route, dead letters...) written at the end. */
  readonly counters: Readonly<Record<string, number>>;
}

export interface NewExecution {
  readonly id: string;
  readonly configName: string;
  readonly configVersion: number | null;
  readonly configSnapshot: PipelineConfig;
  readonly input: JsonValue | null;
  /**
   * `input` as JSON text (`JSON.stringify(input)`), when the caller has it already: a store that
   * keeps the input as text then does not serialise a large one a second time.
   */
  readonly inputText?: string;
  readonly parentExecutionId?: string;
  readonly replayFromRoute?: string;
  /**
   * The process that runs it, by the id of its lease on the database (docs/deployment.md): while
   * that lease is live no other process resumes the execution. Stores without leases ignore it.
   */
  readonly ownerNode?: string;
}

/** What `listExecutions` orders by (see {@link ExecutionListQuery.sort}). */
export type ExecutionSort = "started" | "duration" | "status";

/** The order of statuses when sorting by status, ascending: what needs attention first. */
export const EXECUTION_STATUS_ORDER: readonly ExecutionStatus[] = [
  "running",
  "failed",
  "cancelled",
  "completed",
];

/** How executions are read. */
export interface ExecutionReadOptions {
  /**
   * Load the input (it can be large); without it `input` is `null`. A caller that only needs the
   * status (a wait for the end) leaves out parsing an input of megabytes. @default true
   */
  readonly includeInput?: boolean;
}

export interface ExecutionListQuery extends ExecutionReadOptions {
  readonly status?: ExecutionStatus;
  readonly configName?: string;
  readonly parentExecutionId?: string;
  /**
   * Only executions started at or after this instant (ISO 8601 with a zone, or a `Date`).
   */
  readonly startedFrom?: string | Date;
  /** Only executions started strictly before this instant (ISO 8601 with a zone, or a `Date`). */
  readonly startedTo?: string | Date;
  /**
   * `started`: by start time. `duration`: by end minus start, a running execution counting until
   * now. `status`: running, failed, cancelled, completed (ascending), newest first within a status.
   * Ties always fall back to the newest first, so pages are stable. @default "started"
   */
  readonly sort?: ExecutionSort;
  /** @default "desc" (newest, longest, or completed first) */
  readonly direction?: "asc" | "desc";
  readonly offset?: number;
  readonly limit?: number;
}

/** Persistence of configs and executions (separate from the lineage writer). */
export interface ExecutionStoreProtocol {
  saveConfig(name: string, source: string, parsed: PipelineConfig): Promise<StoredConfig>;
  getConfig(name: string, version?: number): Promise<StoredConfig | undefined>;
  listConfigs(): Promise<readonly StoredConfig[]>;

  createExecution(execution: NewExecution): Promise<ExecutionRecord>;
  getExecution(id: string, options?: ExecutionReadOptions): Promise<ExecutionRecord | undefined>;
  listExecutions(query?: ExecutionListQuery): Promise<{ total: number; items: readonly ExecutionRecord[] }>;
  /** Moves a running execution to a final status. Returns false if it was not running. */
  finishExecution(
    id: string,
    status: Exclude<ExecutionStatus, "running">,
    details?: { error?: string; counters?: Record<string, number> },
  ): Promise<boolean>;
  /** Deletes executions finished before `before`, with their lineage. Returns how many. */
  deleteExecutionsBefore(before: Date): Promise<number>;
  close(): Promise<void>;
}
