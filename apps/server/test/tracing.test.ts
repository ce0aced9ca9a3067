import { tracesExportersFromEnv } from "@factflow/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RABBITMQ_URL, unreachable } from "./services.js";
import {
  eventually,
  expectSpansMatchLineage,
  probed,
  startTracedServer,
  type TracedServer,
  traceTree,
} from "./tracing-harness.js";

// A W3C trace context as a user's own service would send it on the start request.
const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const TRACEPARENT = `00-${CALLER_TRACE}-${CALLER_SPAN}-01`;

const CASES = [
  { provider: "embedded", skip: false, settings: { provider: "embedded", embedded_mode: "memory" } },
  {
    provider: "rabbitmq",
    skip: (await unreachable("the rabbitmq tracing test", [RABBITMQ_URL])) !== undefined,
    settings: { provider: "rabbitmq", rabbitmq_url: RABBITMQ_URL },
  },
] as const;

describe.each(CASES)("tracing on $provider", ({ skip, settings }) => {
  let server: TracedServer;
  beforeAll(async () => {
    if (skip) return;
    server = await startTracedServer({ ...settings, lineage: "memory" });
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  }, 180_000);

  it.skipIf(skip)(
    "the span tree of a fan-out/fan-in execution is its lineage tree, under the start request's traceparent",
    async () => {
      const response = await server.fetch("/api/v1/executions", {
        method: "POST",
        body: JSON.stringify({ config: "traced" }),
        traceparent: TRACEPARENT,
        baggage: "tenant=acme",
      });
      expect(response.status, await response.clone().text()).toBe(201);
      const { id } = (await response.json()) as { id: string };
      const record = await server.rt.engine.waitForEnd(id);
      expect(record.status).toBe("completed");
      await server.rt.lineage.flush();
      const { items: rows } = await server.rt.lineage.rows(id, { limit: 1000 });
      // Spans end when their delivery settles, just after its lineage row: wait for all of them.
      await eventually(
        () =>
          server.exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === CALLER_TRACE).length >=
          rows.length + 1,
        "every span of the execution",
      );
      const spans = server.exporter.getFinishedSpans();
      const { execution, deliveries, adapters } = expectSpansMatchLineage(spans, rows, id);
      // FACTFLOW_PRINT_TRACE=1 prints the tree (docs/observability.md shows one).
      if (process.env.FACTFLOW_PRINT_TRACE === "1") console.log(traceTree(spans, CALLER_TRACE));

      // The execution's trace is the caller's: its span is a child of the request's span.
      expect(execution.spanContext().traceId).toBe(CALLER_TRACE);
      expect(execution.parentSpanContext?.spanId).toBe(CALLER_SPAN);
      expect(execution.attributes["factflow.outcome"]).toBe("completed");

      // Baggage travelled with the messages; user code inside an adapter sees the adapter's span active.
      const probes = adapters.filter((s) => s.attributes["factflow.adapter"] === "probe");
      expect(probes).toHaveLength(4);
      for (const span of probes) {
        const seen = probed.get(span.attributes["factflow.lineage.id"] as string);
        expect(seen?.baggage).toBe("tenant=acme");
        expect(seen?.activeSpanId).toBe(span.spanContext().spanId);
      }

      // 1 seed + 4 fan-out children + 4 into the batch; 1 split + 4 × 2 passthrough + 4 batch.
      expect(deliveries).toHaveLength(9);
      expect(adapters).toHaveLength(13);
      const byRoute = (route: string) => deliveries.filter((s) => s.attributes["factflow.route"] === route);
      expect(byRoute("fanout")).toHaveLength(1);
      expect(byRoute("work")).toHaveLength(4);
      expect(byRoute("collect")).toHaveLength(4);
      const split = adapters.find((s) => s.attributes["factflow.adapter"] === "split");
      expect(split?.attributes["factflow.emitted"]).toBe(4);

      // Fan-in: the delivery that completed the batch links the three others it carried.
      const leaders = byRoute("collect").filter((s) => s.links.length > 0);
      expect(leaders).toHaveLength(1);
      const leader = leaders[0];
      expect(leader?.attributes["factflow.batch.members"]).toBe(4);
      const linked = new Set(leader?.links.map((l) => l.context.spanId));
      const others = byRoute("collect").filter((s) => s !== leader);
      expect(linked).toEqual(new Set(others.map((s) => s.spanContext().spanId)));
      expect(leader?.links.every((l) => l.attributes?.["factflow.link"] === "batch-member")).toBe(true);
    },
    180_000,
  );
});

describe("tracing is configured by the OTEL_* variables", () => {
  it("stays off unless an exporter or an OTLP endpoint is named", () => {
    expect(tracesExportersFromEnv({})).toEqual([]);
    expect(tracesExportersFromEnv({ OTEL_SERVICE_NAME: "x" })).toEqual([]);
    expect(tracesExportersFromEnv({ OTEL_TRACES_EXPORTER: "none" })).toEqual([]);
    expect(tracesExportersFromEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })).toEqual([
      "otlp",
    ]);
    expect(tracesExportersFromEnv({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:4318/v1/traces" })).toEqual(
      ["otlp"],
    );
    expect(tracesExportersFromEnv({ OTEL_TRACES_EXPORTER: "otlp, console" })).toEqual(["otlp", "console"]);
    expect(tracesExportersFromEnv({ OTEL_TRACES_EXPORTER: "otlp", OTEL_SDK_DISABLED: "true" })).toEqual([]);
  });
});
