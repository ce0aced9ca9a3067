import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "@factflow/protocols";
import { composeRuntime, loadSettings, loadTracing } from "@factflow/runtime";
import { afterEach, describe, expect, it } from "vitest";

/** A stand-in OTLP/HTTP collector on loopback: records the trace exports it receives. */
async function collector() {
  const received: { path: string; contentType: string | undefined; body: string }[] = [];
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      received.push({
        path: request.url ?? "",
        contentType: request.headers["content-type"],
        body: Buffer.concat(chunks).toString("utf8"),
      });
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received, close: () => server.close() };
}

const { startTracing } = await loadTracing();
const saved = { ...process.env };
afterEach(() => {
  for (const key of Object.keys(process.env)) if (key.startsWith("OTEL_")) delete process.env[key];
  Object.assign(process.env, saved);
});

describe("tracing from the OTEL_* variables", () => {
  it("is off when no exporter is asked for", () => {
    expect(startTracing({ serviceName: "factflow", env: {}, registerGlobals: false })).toBeUndefined();
  });

  it("exports spans over OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT, named by OTEL_SERVICE_NAME", async () => {
    const otlp = await collector();
    try {
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.url;
      process.env.OTEL_SERVICE_NAME = "ingest-prod";
      const tracing = startTracing({ serviceName: "factflow", registerGlobals: false });
      expect(tracing).toBeDefined();
      const span = tracing?.tracer.startSpan("execution demo", {
        attributes: { "factflow.execution.id": "e1" },
      });
      span?.end({ ok: true });
      await tracing?.shutdown();
      expect(otlp.received.map((r) => r.path)).toContain("/v1/traces");
      const body = otlp.received.map((r) => r.body).join("\n");
      expect(body).toContain("ingest-prod");
      expect(body).toContain("execution demo");
    } finally {
      otlp.close();
    }
  });

  it("names an unsupported exporter in a clear error", () => {
    expect(() =>
      startTracing({
        serviceName: "factflow",
        env: { OTEL_TRACES_EXPORTER: "zipkin" },
        registerGlobals: false,
      }),
    ).toThrow(/OTEL_TRACES_EXPORTER names "zipkin".*"otlp"/);
  });
});

describe("a composed runtime", () => {
  /** Composes a runtime (lineage in memory) and returns what it logged at info level. */
  async function composedInfo(): Promise<string[]> {
    const dir = mkdtempSync(join(tmpdir(), "factflow-tracing-compose-"));
    const info: string[] = [];
    const logger: Logger = {
      debug: () => {},
      info: (message) => {
        info.push(message);
      },
      warn: () => {},
      error: () => {},
      child: () => logger,
    };
    try {
      const settings = loadSettings({ env: {}, cwd: dir, overrides: { data_dir: dir, lineage: "memory" } });
      const runtime = await composeRuntime(settings, { logger, scheduleRetention: false });
      await runtime.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return info;
  }

  it("turns tracing on from the OTEL_* variables, and leaves it off without them", async () => {
    expect(await composedInfo()).not.toContain("OpenTelemetry tracing is on (OTEL_* variables)");
    const otlp = await collector();
    try {
      process.env.OTEL_EXPORTER_OTLP_ENDPOINT = otlp.url;
      expect(await composedInfo()).toContain("OpenTelemetry tracing is on (OTEL_* variables)");
    } finally {
      otlp.close();
    }
  });
});
