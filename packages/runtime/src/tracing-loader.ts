/**
 * OpenTelemetry's SDK is heavy: the package entry point does not import it. `loadTracing()` loads
 * tracing.ts on demand, as compose.ts does when the OTEL_* variables turn tracing on.
 */
export function loadTracing(): Promise<typeof import("./tracing.js")> {
  return import("./tracing.js");
}
