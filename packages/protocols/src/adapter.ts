import type { MessageEnvelope } from "./envelope.js";
import type { JsonObject, JsonValue } from "./json.js";
import type { Logger } from "./logger.js";
import type { StorageProtocol } from "./storage-protocol.js";

/** Everything one adapter invocation may use. */
export interface PipelineContext {
  /** The input: the delivered body for the first adapter, the previous adapter's `data` after. */
  readonly message: JsonValue;
  /** The delivery as it arrived on the route's inbound queue. */
  readonly envelope: MessageEnvelope;
  readonly executionId: string;
  readonly route: string;
  readonly adapterIndex: number;
  readonly correlationId: string;
  readonly messageId: string;
  /** 1-based delivery attempt. */
  readonly attempt: number;
  /** The lineage row of this invocation; pass it to storage writes as `lineageId`. */
  readonly lineageId: string;
  readonly storage: StorageProtocol;
  readonly logger: Logger;
  /** Fires on cancellation (shutdown, timeout, execution cancelled). Adapters must be cancel-safe. */
  readonly signal: AbortSignal;
}

/** A message an adapter fans out. */
export interface EmittedMessage {
  readonly body: JsonValue;
  /** Publish only to this outbound queue of the route (default: every outbound queue). */
  readonly queue?: string;
  readonly headers?: Record<string, string>;
  readonly priority?: number;
}

/** Free-form metadata; `fatal: true` aborts the whole execution, `retryable` classifies a failure. */
export interface AdapterMetadata {
  readonly fatal?: boolean;
  readonly retryable?: boolean;
  readonly [key: string]: JsonValue | undefined;
}

/**
 * What `process` returns.
 *
 * - `data` feeds the next adapter; after the last adapter it is published to every outbound queue.
 *   `null` ends the chain: nothing further runs and nothing is published (except `emitMessages`).
 * - `emitMessages` fans out: the engine pre-registers every child in lineage, then publishes them.
 * - `error` marks the invocation failed; `retryable` (or `metadata.retryable`) says whether a retry
 *   may succeed (default true); `metadata.fatal` aborts the execution and wins over both.
 */
export interface AdapterResult {
  readonly data: JsonValue | null;
  readonly emitMessages?: readonly EmittedMessage[];
  readonly error?: string;
  readonly retryable?: boolean;
  readonly metadata?: AdapterMetadata;
  /** Storage keys this invocation wrote (recorded in lineage). */
  readonly outputKeys?: readonly string[];
}

/** A stateless adapter: every message is processed independently. */
export interface Adapter {
  readonly type: string;
  process(context: PipelineContext): Promise<AdapterResult> | AdapterResult;
  /** Releases resources when the execution ends. */
  close?(): Promise<void> | void;
}

/** Context of a timer-driven flush of a stateful adapter. */
export interface FlushContext {
  readonly executionId: string;
  readonly route: string;
  readonly storage: StorageProtocol;
  readonly logger: Logger;
  readonly signal: AbortSignal;
}

/**
 * A fan-in adapter that accumulates across messages. `process` returns `data: null` while the batch
 * is not ready and the aggregated result when it is; the engine also calls `flush` every
 * `flushIntervalMs` (default 5000) and when the route drains, and publishes a non-null result.
 */
export interface StatefulAdapter extends Adapter {
  readonly stateful: true;
  /** @default 5000 */
  readonly flushIntervalMs?: number;
  /**
   * Messages one batch holds at most. The engine keeps every message of an unemitted batch
   * unsettled (so a crash redelivers it), and sizes the route's prefetch and concurrency to at least
   * this so a full batch can form. Unset: only the timer and the route draining emit.
   */
  readonly capacity?: number;
  /** Emits whatever is accumulated, or `null` when there is nothing. */
  flush(context: FlushContext): Promise<AdapterResult | null> | AdapterResult | null;
  /**
   * Drops a message it holds (by message id): its delivery left the batch unsettled (the connection
   * was lost, the subscription stopped), and the broker hands the message out again, which adds it
   * anew. An adapter without `forget` would emit that message with a batch its delivery is no longer
   * part of, and again with the redelivered one.
   */
  forget?(messageId: string): void;
}

export function isStatefulAdapter(adapter: Adapter): adapter is StatefulAdapter {
  return (adapter as Partial<StatefulAdapter>).stateful === true;
}

/** What an adapter factory receives. */
export interface AdapterFactoryContext {
  readonly logger: Logger;
  readonly executionId: string;
  readonly route: string;
  /** Directory of the pipeline config file, to resolve relative paths in adapter config. */
  readonly baseDir?: string;
}

/** A named adapter type usable from pipeline YAML. */
export interface AdapterDefinition {
  readonly type: string;
  readonly description: string;
  /**
   * True when the adapter may return `data: null` for some inputs (a filter), ending the chain. A
   * route cycle passing through such an adapter can terminate, so config validation accepts it.
   */
  readonly mayEndChain?: boolean;
  /**
   * For a fan-in adapter that keeps messages unsettled until it emits them (a batch): the longest it
   * holds one, in ms, from its (valid) config. Config validation uses it: a held message would block
   * an ordered route (`ordering: fifo` or `group_by`), and must not outlive the route's handler
   * timeout, which runs while the message is held.
   */
  holdsMessagesMs?(config: JsonObject): number;
  /** Validates the adapter's `config` block; throw a `ConfigError` (or return issues) when invalid. */
  validateConfig?(config: JsonObject): readonly string[];
  create(config: JsonObject, context: AdapterFactoryContext): Adapter | Promise<Adapter>;
}

/** What a module listed in a pipeline's `adapter_modules` exports. */
export interface AdapterModule {
  readonly adapters: readonly AdapterDefinition[];
}
