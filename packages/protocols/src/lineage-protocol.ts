import type { JsonValue } from "./json.js";

/**
 * Status of a lineage row. `pending`, `initiated` and `processing` are "open": an execution cannot
 * complete while any of its rows is open.
 */
export type LineageStatus =
  | "pending"
  | "initiated"
  | "processing"
  | "completed"
  | "failed"
  | "abandoned"
  /** A route's condition returned false: the message was acknowledged without running the adapters. */
  | "skipped";

export const OPEN_LINEAGE_STATUSES: readonly LineageStatus[] = ["pending", "initiated", "processing"];

/**
 * `message` rows track one message addressed to a route (created when it is published, closed when
 * the route settles it); `adapter` rows track one adapter invocation on one delivery.
 */
export type LineageKind = "message" | "adapter";

/** Why a hop failed. */
export interface LineageErrorInfo {
  /** Error class name, e.g. `TypeError`, `DeliveryAbandoned`. */
  readonly class: string;
  readonly message: string;
  readonly retryable: boolean;
  readonly fatal: boolean;
  /**
   * The stack of a thrown `Error` (cut at 8,000 characters); absent when the adapter reported the
   * error as a result rather than throwing, or the thrown value was not an `Error`.
   */
  readonly stack?: string;
}

/** One lineage row as written by the engine. */
export interface LineageRow {
  /** UUID of the row. */
  readonly id: string;
  readonly executionId: string;
  readonly kind: LineageKind;
  readonly route: string;
  /** Adapter type name (adapter rows). */
  readonly adapter?: string;
  /** 0-based position of the adapter in its route (adapter rows). */
  readonly adapterIndex?: number;
  readonly messageId: string;
  readonly correlationId: string;
  /** The row this one descends from (fan-out tree). */
  readonly parentId?: string;
  /**
   * Message rows: the message whose adapter row `parentId` names. Database stores keep it to walk
   * the tree up without finding that adapter row by id (it may be stored inside its message's row);
   * reads do not return it.
   */
  readonly parentMessageId?: string;
  readonly attempt: number;
  readonly status: LineageStatus;
  /** sha256 hex of the canonical JSON input. */
  readonly inputHash?: string;
  /** The message body (message rows), kept so a segment can be replayed. */
  readonly payload?: JsonValue;
  readonly outputKeys?: readonly string[];
  readonly error?: LineageErrorInfo;
  readonly startedAt: string;
  readonly finishedAt?: string;
  /**
   * Set by a database store on a row it read back: the columns (`payload`, `error`, `correlation_id`,
   * …) in which NUL characters (U+0000), which PostgreSQL cannot store in text or jsonb, were each
   * replaced by the six characters `\u0000`. Absent on rows stored as written. Ignored on write.
   */
  readonly sanitised?: readonly string[];
}

/** A change to an existing row. */
export interface LineageUpdate {
  readonly status: LineageStatus;
  readonly outputKeys?: readonly string[];
  readonly error?: LineageErrorInfo;
  readonly finishedAt?: string;
  readonly attempt?: number;
}

/** Counters an operator reads to know lineage is complete. */
export interface LineageCounters {
  /** Rows + updates committed. */
  written: number;
  /** Write attempts that failed and were retried. */
  retriedWrites: number;
  /** Writes given up after retries: lineage that is missing. Should stay 0. */
  lost: number;
  /** Writes queued and not yet committed. */
  queued: number;
}

export interface LineagePageQuery {
  readonly status?: LineageStatus;
  readonly route?: string;
  readonly kind?: LineageKind;
  readonly offset?: number;
  readonly limit?: number;
}

/** Per route and status counts of one execution. */
export interface RouteStatusCount {
  readonly route: string;
  readonly kind: LineageKind;
  readonly status: LineageStatus;
  readonly count: number;
}

/** A message recorded as the input of a route, usable to replay it. */
export interface RecordedInput {
  readonly messageId: string;
  readonly correlationId: string;
  readonly payload: JsonValue;
}

/**
 * Lineage persistence. Writes are group-committed: `record` and `update` queue and return at once
 * (a write failure is retried, then counted as lost, never thrown into the pipeline); `flush`
 * resolves once everything queued before it is durable. `registerPending` is durable on return.
 */
/** Rows a lineage tree holds unless asked for another limit. */
export const DEFAULT_LINEAGE_TREE_LIMIT = 5000;

/** The most rows the HTTP API returns for one lineage tree. */
export const MAX_LINEAGE_TREE_LIMIT = 20_000;

export interface LineageTreeQuery {
  /** At most this many rows (a positive integer); the ancestors' rows are returned even beyond it. */
  readonly limit?: number;
}

export interface LineageTree {
  readonly items: readonly LineageRow[];
  /** Some descendants were left out to keep within the limit. */
  readonly truncated: boolean;
}

export interface LineageProtocol {
  record(row: LineageRow): void;
  update(id: string, update: LineageUpdate): void;
  /** Pre-registers rows (fan-out children) durably before their messages are published. */
  registerPending(rows: readonly LineageRow[]): Promise<void>;
  flush(): Promise<void>;
  /**
   * Resolves once every `record` and `update` made before the call is durable, except rows the
   * store keeps back in memory while they are still open (the engine awaits it before a delivery is
   * settled with the broker, so an acknowledged message's settled rows survive a crash, while a quick
   * hop's rows are still written once, settled). A store that writes at once, or keeps nothing
   * across a crash, need not implement it.
   */
  flushSettled?(): Promise<void>;
  /**
   * Backpressure for `record`/`update` callers: `undefined` while at most `limit` writes are queued,
   * otherwise a promise that resolves once no more than `limit` are (commits go on meanwhile, so a
   * caller can queue its next writes while the batch before them is being committed). A store that
   * applies writes at once need not implement it.
   */
  roomFor?(limit: number): Promise<void> | undefined;
  /**
   * Rows of the execution in `pending`, `initiated` or `processing`, counting every `record` and
   * `update` made before the call (the store flushes, or counts rows it holds in memory, itself).
   */
  countOpen(executionId: string): Promise<number>;
  counters(): LineageCounters;

  rows(
    executionId: string,
    query?: LineagePageQuery,
  ): Promise<{ total: number; items: readonly LineageRow[] }>;
  countsByRoute(executionId: string): Promise<readonly RouteStatusCount[]>;
  /**
   * The tree that contains this message, by start time: every row of the message and of the
   * messages it descends from (always complete, however many), then its descendants breadth-first
   * until the result holds `limit` rows (default {@link DEFAULT_LINEAGE_TREE_LIMIT}); `truncated`
   * says whether descendants were left out.
   */
  tree(executionId: string, messageId: string, query?: LineageTreeQuery): Promise<LineageTree>;
  /** The messages that entered `route` (message rows), optionally only these ids. */
  routeInputs(
    executionId: string,
    route: string,
    messageIds?: readonly string[],
  ): Promise<readonly RecordedInput[]>;
  /**
   * The committed `message` row of `messageId` (no flush: what other processes see too), or
   * undefined when none is stored. The engine asks it for broker-redelivered messages it has no
   * memory of, to acknowledge one already settled for good instead of running it again. Optional:
   * without it, that recognition is limited to the process that settled the message.
   */
  messageStatus?(
    executionId: string,
    messageId: string,
  ): Promise<{ readonly status: LineageStatus; readonly attempt: number } | undefined>;
  close(): Promise<void>;
}
