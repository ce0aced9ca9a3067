import {
  TraceAttribute as A,
  type Delivery,
  type HandlerResult,
  Headers,
  MessageStatus,
  type OutboundMessage,
  type TraceCarrier,
  type Tracer,
  type TraceSpan,
  unwrapHandlerResult,
} from "@factflow/protocols";

/**
 * The engine's side of tracing (docs/observability.md); the execution span is started in
 * execution/tracing-execution.ts. Every function here is called only when the engine has a tracer:
 * without one no span is created and no trace header is read.
 *
 * - an execution span per execution, child of the caller's active context (the start request);
 * - a delivery span per delivery per route, child of the context its message carried;
 * - an adapter span per adapter invocation inside it;
 * - every published message carries the context of the adapter span that produced it, so the span
 *   tree follows the lineage tree (message row → adapter rows → child message rows);
 * - a batch leader's delivery span links the deliveries whose messages it carries (fan-in).
 */

/** The trace headers of a received message: its `traceparent` plus `tracestate`/`baggage`. */
export function carrierOf(delivery: Delivery): TraceCarrier {
  const message = delivery.message;
  const headers = message.headers;
  return {
    traceparent: message.traceparent ?? headers[Headers.traceparent],
    tracestate: headers.tracestate,
    baggage: headers.baggage,
  };
}

/** Starts the span of one delivery to one route. */
export function startDeliverySpan(
  tracer: Tracer,
  executionId: string,
  route: string,
  delivery: Delivery,
): TraceSpan {
  const message = delivery.message;
  return tracer.startSpan(`route ${route}`, {
    kind: "consumer",
    carrier: carrierOf(delivery),
    attributes: {
      [A.executionId]: executionId,
      [A.route]: route,
      [A.queue]: delivery.destination,
      [A.messageId]: message.id,
      [A.correlationId]: message.correlationId,
      [A.attempt]: delivery.attempt,
    },
  });
}

/**
 * The outcome attribute of a delivery: what the handler returned (`acknowledged`, `failed` (to be
 * retried or dead-lettered), `rejected`, `pending` (abandoned, redelivered)), or `skipped`/`duplicate`.
 */
export function endDeliverySpan(
  span: TraceSpan,
  result: HandlerResult,
  note?: "skipped" | "duplicate",
): void {
  const { status, reason } = unwrapHandlerResult(result);
  const outcome = note ?? String(status).toLowerCase();
  const ok = status === MessageStatus.ACKNOWLEDGED || status === MessageStatus.PENDING;
  span.end({
    ok,
    ...(reason === undefined ? {} : { message: reason }),
    attributes: { [A.outcome]: outcome },
  });
}

/**
 * The spans of one delivery's walk through its adapters, and the trace context each adapter row hands
 * to the messages it produced.
 */
export class ChainTrace {
  readonly delivery: TraceSpan;
  /** Set when the delivery ran no adapter: its outcome attribute says why. */
  note: "skipped" | "duplicate" | undefined;
  readonly #tracer: Tracer;
  readonly #open = new Map<string, TraceSpan>();
  /** Adapter row id → the headers that make a receiver's span a child of that adapter's span. */
  readonly #contexts = new Map<string, Record<string, string>>();

  constructor(tracer: Tracer, delivery: TraceSpan) {
    this.#tracer = tracer;
    this.delivery = delivery;
  }

  /** Opens the span of one adapter invocation (lineage row `rowId`). */
  adapterStarted(rowId: string, adapter: string, index: number): TraceSpan {
    const span = this.#tracer.startSpan(`adapter ${adapter}`, {
      parent: this.delivery,
      attributes: { [A.adapter]: adapter, [A.adapterIndex]: index, [A.lineageId]: rowId },
    });
    this.#open.set(rowId, span);
    const context: Record<string, string> = {};
    span.inject(context);
    this.#contexts.set(rowId, context);
    return span;
  }

  /** Closes the span of the invocation `rowId`, with its lineage status as the outcome. */
  adapterEnded(rowId: string, outcome: string, error?: string, emitted = 0): void {
    const span = this.#open.get(rowId);
    if (span === undefined) return;
    this.#open.delete(rowId);
    span.end({
      ok: error === undefined,
      ...(error === undefined ? {} : { message: error }),
      attributes: { [A.outcome]: outcome, ...(emitted > 0 ? { [A.emitted]: emitted } : {}) },
    });
  }

  /** Sets the trace context of a message produced by adapter row `parentRowId` (or by the delivery). */
  stamp(message: OutboundMessage, parentRowId: string | undefined): void {
    let context = parentRowId === undefined ? undefined : this.#contexts.get(parentRowId);
    if (context === undefined) {
      context = {};
      this.delivery.inject(context);
    }
    for (const [key, value] of Object.entries(context)) {
      if (key === Headers.traceparent) message.traceparent = value;
      else message.headers = { ...message.headers, [key]: value };
    }
  }
}

/** The context of a span, as headers. */
export function contextOf(span: TraceSpan): Record<string, string> {
  const headers: Record<string, string> = {};
  span.inject(headers);
  return headers;
}
