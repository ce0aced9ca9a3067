import type { TraceAttributes, TraceCarrier, TraceEnd, Tracer, TraceSpan } from "@factflow/protocols";
import {
  type Context,
  context,
  type Tracer as OtelTracer,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapPropagator,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { registerRequestContext, tracesExportersFromEnv } from "./trace-requests.js";

/**
 * OpenTelemetry for Factflow (docs/observability.md): the engine's `Tracer` seam implemented with the
 * OpenTelemetry API, and the SDK configured from the standard `OTEL_*` variables. Off unless those
 * variables ask for an exporter; then the engine gets a tracer, nothing else changes.
 */

const SCOPE = "@factflow/engine";

/** W3C `traceparent`/`tracestate` and `baggage`. */
export const w3cPropagator: TextMapPropagator = new CompositePropagator({
  propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
});

const carrierGetter: TextMapGetter<TraceCarrier> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => carrier[key],
};

const headersGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

const KINDS = { internal: SpanKind.INTERNAL, consumer: SpanKind.CONSUMER, producer: SpanKind.PRODUCER };

class OtelSpan implements TraceSpan {
  readonly span: Span;
  /** The parent's context with this span set: what `inject` writes and `run` makes active. */
  readonly context: Context;
  readonly #propagator: TextMapPropagator;

  constructor(span: Span, parent: Context, propagator: TextMapPropagator) {
    this.span = span;
    this.context = trace.setSpan(parent, span);
    this.#propagator = propagator;
  }

  inject(headers: Record<string, string>): void {
    this.#propagator.inject(this.context, headers, {
      set: (carrier, key, value) => {
        carrier[key] = value;
      },
    });
  }

  setAttributes(attributes: TraceAttributes): void {
    this.span.setAttributes(attributes);
  }

  addLink(carrier: TraceCarrier, attributes?: TraceAttributes): void {
    const linked = trace.getSpanContext(this.#propagator.extract(ROOT_CONTEXT, carrier, carrierGetter));
    if (linked === undefined) return;
    this.span.addLink(attributes === undefined ? { context: linked } : { context: linked, attributes });
  }

  run<T>(work: () => T): T {
    return context.with(this.context, work);
  }

  end(outcome: TraceEnd): void {
    if (outcome.attributes !== undefined) this.span.setAttributes(outcome.attributes);
    if (!outcome.ok)
      this.span.setStatus({
        code: SpanStatusCode.ERROR,
        ...(outcome.message === undefined ? {} : { message: outcome.message }),
      });
    this.span.end();
  }
}

/** The engine's `Tracer` on an OpenTelemetry tracer. */
export function otelTracer(tracer: OtelTracer, propagator: TextMapPropagator = w3cPropagator): Tracer {
  return {
    startSpan(name, options = {}) {
      const parent =
        options.parent instanceof OtelSpan
          ? options.parent.context
          : options.carrier !== undefined
            ? propagator.extract(ROOT_CONTEXT, options.carrier, carrierGetter)
            : context.active();
      const span = tracer.startSpan(
        name,
        {
          kind: KINDS[options.kind ?? "internal"],
          ...(options.attributes === undefined ? {} : { attributes: options.attributes }),
        },
        parent,
      );
      return new OtelSpan(span, parent, propagator);
    },
  };
}

let contextManagerInstalled = false;

/** Makes the trace context of a request's headers active while `handle` runs (for `traceRequests`). */
function withRequestContext<R>(headers: Headers, handle: () => R): R {
  return context.with(w3cPropagator.extract(ROOT_CONTEXT, headers, headersGetter), handle);
}

/**
 * Makes `context.with` work across `await` (AsyncLocalStorage), once per process. Kept when the
 * application already registered a context manager of its own.
 */
export function installContextManager(): void {
  if (contextManagerInstalled) return;
  contextManagerInstalled = true;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
}

function exporterNamed(name: string): SpanExporter {
  if (name === "otlp") return new OTLPTraceExporter();
  if (name === "console") return new ConsoleSpanExporter();
  throw new Error(
    `OTEL_TRACES_EXPORTER names "${name}", which Factflow does not ship: use "otlp" (OTLP over HTTP, endpoint from OTEL_EXPORTER_OTLP_ENDPOINT), "console" or "none"`,
  );
}

/** A running tracer provider and the engine's tracer on it. */
export interface Tracing {
  readonly tracer: Tracer;
  readonly provider: TracerProvider;
  /** Exports what is buffered and stops the provider (call on close). */
  shutdown(): Promise<void>;
}

export interface StartTracingOptions {
  /** `service.name` when `OTEL_SERVICE_NAME` (or `OTEL_RESOURCE_ATTRIBUTES`) does not set one. */
  readonly serviceName: string;
  /** Exporters to use instead of the ones the environment names (tests: an InMemorySpanExporter). */
  readonly exporters?: readonly SpanExporter[];
  /** Export each span when it ends instead of in batches (tests). @default false */
  readonly simple?: boolean;
  /** Make the provider and propagator the process's global ones. @default true */
  readonly registerGlobals?: boolean;
  /** @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Starts OpenTelemetry tracing when the environment asks for it (`OTEL_TRACES_EXPORTER`, or an
 * `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`), or when `exporters` are given; otherwise returns undefined
 * and nothing is loaded into the engine's path.
 */
export function startTracing(options: StartTracingOptions): Tracing | undefined {
  const env = options.env ?? process.env;
  const exporters = options.exporters ?? tracesExportersFromEnv(env).map(exporterNamed);
  if (exporters.length === 0) return undefined;
  installContextManager();
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": options.serviceName }))
    .merge(detectResources({ detectors: [envDetector] }));
  const spanProcessors: SpanProcessor[] = exporters.map((exporter) =>
    options.simple === true || exporter instanceof ConsoleSpanExporter
      ? new SimpleSpanProcessor({ exporter })
      : new BatchSpanProcessor({ exporter }),
  );
  const provider = new TracerProvider({ resource, spanProcessors });
  if (options.registerGlobals !== false) {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(w3cPropagator);
  }
  const unregister = registerRequestContext(withRequestContext);
  let stopped: Promise<void> | undefined;
  return {
    tracer: otelTracer(provider.getTracer(SCOPE)),
    provider,
    shutdown: () => {
      if (stopped === undefined) {
        unregister();
        stopped = provider.shutdown();
      }
      return stopped;
    },
  };
}
