/**
 * The tracing seam of the engine. The engine starts and ends spans only through this interface, so it
 * depends on no tracing library; the application implements it (the server does with OpenTelemetry,
 * see docs/observability.md). Without a tracer the engine creates no span and reads no trace header.
 */

/** Span attribute values (the OpenTelemetry primitive types). */
export type TraceAttributes = Record<string, string | number | boolean>;

/** Trace context as message headers carry it: `traceparent`, and `tracestate`/`baggage` when present. */
export type TraceCarrier = Readonly<Record<string, string | undefined>>;

/** How a span ended. */
export interface TraceEnd {
  readonly ok: boolean;
  /** Why it failed (set as the span status message). */
  readonly message?: string;
  readonly attributes?: TraceAttributes;
}

/** One unit of traced work. */
export interface TraceSpan {
  /** Writes this span's context (`traceparent`, and `tracestate`/`baggage`) into `headers`. */
  inject(headers: Record<string, string>): void;
  setAttributes(attributes: TraceAttributes): void;
  /** Links the span whose context `carrier` holds (a batch member, a fan-out child's origin). */
  addLink(carrier: TraceCarrier, attributes?: TraceAttributes): void;
  /** Runs `work` with this span as the active context, so code using the tracing library joins it. */
  run<T>(work: () => T): T;
  end(outcome: TraceEnd): void;
}

export interface StartSpanOptions {
  /** A span of this process to nest under. */
  readonly parent?: TraceSpan;
  /**
   * The trace context a message carried (its headers). Used when `parent` is absent; when neither is
   * given the caller's active context is the parent (e.g. the HTTP request that started an execution).
   */
  readonly carrier?: TraceCarrier;
  /** `consumer` for a message delivery, `internal` otherwise. @default "internal" */
  readonly kind?: "internal" | "consumer" | "producer";
  readonly attributes?: TraceAttributes;
}

/** Starts spans. Implemented by the application; the engine receives it as `EngineOptions.tracer`. */
export interface Tracer {
  startSpan(name: string, options?: StartSpanOptions): TraceSpan;
}

/** Span attribute names the engine sets (see docs/observability.md). */
export const TraceAttribute = {
  executionId: "factflow.execution.id",
  pipeline: "factflow.pipeline",
  seed: "factflow.execution.seed",
  route: "factflow.route",
  queue: "messaging.destination.name",
  messageId: "messaging.message.id",
  correlationId: "factflow.correlation.id",
  attempt: "factflow.delivery.attempt",
  outcome: "factflow.outcome",
  adapter: "factflow.adapter",
  adapterIndex: "factflow.adapter.index",
  lineageId: "factflow.lineage.id",
  emitted: "factflow.emitted",
  published: "factflow.published",
  batchMembers: "factflow.batch.members",
  linkKind: "factflow.link",
} as const;
