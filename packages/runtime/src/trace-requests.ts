/**
 * The part of tracing every server loads: which exporters the `OTEL_*` variables ask for, and the
 * request wrapper. OpenTelemetry itself (tracing.ts) is imported only when tracing is on, so a
 * process without it (the default, and every `factflow run`) never loads the SDK.
 */

/** Runs `handle` with the trace context of `headers` active; set while a tracing runs. */
type RequestContext = <R>(headers: Headers, handle: () => R) => R;

/** The request context of each tracing started and not shut down in this process. */
const active: RequestContext[] = [];

/** Called by a tracing when it starts; the returned function, when it shuts down. */
export function registerRequestContext(withContext: RequestContext): () => void {
  active.push(withContext);
  return () => {
    const index = active.indexOf(withContext);
    if (index >= 0) active.splice(index, 1);
  };
}

/** Which exporters the `OTEL_*` variables ask for; empty means tracing stays off. */
export function tracesExportersFromEnv(env: Readonly<Record<string, string | undefined>>): string[] {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return [];
  const listed = env.OTEL_TRACES_EXPORTER?.split(",")
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name.length > 0);
  if (listed !== undefined && listed.length > 0) return listed.includes("none") ? [] : [...new Set(listed)];
  // No exporter named: an OTLP endpoint alone turns tracing on (the spec's default exporter is OTLP).
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  return endpoint !== undefined && endpoint.trim() !== "" ? ["otlp"] : [];
}

/**
 * Wraps a fetch handler (the Hono app's `fetch`) so that a request's `traceparent`/`baggage` is the
 * active context while it is handled: an execution it starts becomes a child of the caller's span.
 * While no tracing runs in the process (the default) a request is passed on untouched.
 */
export function traceRequests<Rest extends unknown[], R>(
  fetch: (request: Request, ...rest: Rest) => R,
): (request: Request, ...rest: Rest) => R {
  return (request, ...rest) => {
    const withContext = active[0];
    if (withContext === undefined || !request.headers.has("traceparent")) return fetch(request, ...rest);
    return withContext(request.headers, () => fetch(request, ...rest));
  };
}
