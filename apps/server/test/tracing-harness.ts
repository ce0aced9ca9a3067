import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AdapterDefinition, LineageRow } from "@factflow/protocols";
import { silentLogger } from "@factflow/protocols";
import {
  composeRuntime,
  type FactflowRuntime,
  loadSettings,
  loadTracing,
  type SettingsInput,
  type Tracing,
  traceRequests,
} from "@factflow/runtime";
import { trace } from "@opentelemetry/api";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace";
import { expect } from "vitest";
import { createApp } from "../src/app.js";

export const TOKEN = "tracing-test-token-0123456789";

/** Fan-out (split into 4), one step per item, fan-in (a batch of 4). */
export const FAN_OUT_FAN_IN = `
name: traced
init:
  route: fanout
  message: { items: [1, 2, 3, 4] }
routes:
  fanout:
    inbound: { queue: traced.in }
    adapters:
      - type: split
        config: { field: items }
    outbound: [traced.items]
  work:
    inbound: { queue: traced.items, concurrency: 4 }
    adapters:
      - type: passthrough
      - type: probe
    outbound: [traced.collect]
  collect:
    inbound: { queue: traced.collect, concurrency: 4 }
    adapters:
      - type: batch
        config: { size: 4, timeout_ms: 60000 }
    outbound: []
`;

/** What the `probe` adapter saw, by lineage row id: the message's baggage and the active span. */
export const probed = new Map<string, { baggage: string | undefined; activeSpanId: string | undefined }>();

/** `probe`: passes its input on, noting what a user's own OpenTelemetry code would see. */
const probeAdapter: AdapterDefinition = {
  type: "probe",
  description: "records the baggage header and the active span",
  create: () => ({
    type: "probe",
    process(ctx) {
      probed.set(ctx.lineageId, {
        baggage: ctx.envelope.headers.baggage,
        activeSpanId: trace.getActiveSpan()?.spanContext().spanId,
      });
      return { data: ctx.message };
    },
  }),
};

export interface TracedServer {
  readonly rt: FactflowRuntime;
  readonly exporter: InMemorySpanExporter;
  readonly tracing: Tracing;
  /** The Hono app's fetch, wrapped by `traceRequests` as the server wraps it. */
  fetch(path: string, init: RequestInit & { traceparent?: string; baggage?: string }): Promise<Response>;
  stop(): Promise<void>;
}

/** A runtime composed from settings with an in-memory span exporter, and its HTTP app. */
export async function startTracedServer(
  overrides: Partial<Record<keyof SettingsInput, string | number>>,
): Promise<TracedServer> {
  const dir = mkdtempSync(join(tmpdir(), "factflow-tracing-"));
  const configDir = join(dir, "configs");
  mkdirSync(configDir);
  writeFileSync(join(configDir, "traced.yaml"), FAN_OUT_FAN_IN);
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: { data_dir: join(dir, "data"), config_dir: configDir, api_token: TOKEN, ...overrides },
  });
  const exporter = new InMemorySpanExporter();
  const { startTracing } = await loadTracing();
  const tracing = startTracing({
    serviceName: "factflow-test",
    exporters: [exporter],
    simple: true,
    registerGlobals: false,
  });
  if (tracing === undefined) throw new Error("tracing with an explicit exporter must start");
  const rt = await composeRuntime(settings, {
    logger: silentLogger,
    tracing,
    adapters: [probeAdapter],
    scheduleRetention: false,
    progressIntervalMs: 100,
  });
  const app = createApp(rt, { log: () => {} });
  const fetch = traceRequests(app.fetch);
  return {
    rt,
    exporter,
    tracing,
    fetch(path, { traceparent, baggage, ...init }) {
      const headers = new Headers(init.headers);
      headers.set("authorization", `Bearer ${TOKEN}`);
      headers.set("content-type", "application/json");
      if (traceparent !== undefined) headers.set("traceparent", traceparent);
      if (baggage !== undefined) headers.set("baggage", baggage);
      return Promise.resolve(fetch(new Request(`http://127.0.0.1${path}`, { ...init, headers })));
    },
    async stop() {
      await rt.close();
      await tracing.shutdown();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const attr = (span: ReadableSpan, key: string) => span.attributes[key];
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan) => span.spanContext().spanId;

/**
 * Checks that the spans of one execution mirror its lineage: one delivery span per message row, one
 * adapter span per adapter row, each parented as the rows are, all in one trace. Returns the spans.
 */
export function expectSpansMatchLineage(
  spans: readonly ReadableSpan[],
  rows: readonly LineageRow[],
  executionId: string,
): { execution: ReadableSpan; deliveries: ReadableSpan[]; adapters: ReadableSpan[] } {
  const execution = spans.find(
    (s) => s.name.startsWith("execution ") && attr(s, "factflow.execution.id") === executionId,
  );
  expect(execution, "an execution span").toBeDefined();
  const traceId = (execution as ReadableSpan).spanContext().traceId;
  const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);
  const deliveries = inTrace.filter((s) => s.name.startsWith("route "));
  const adapters = inTrace.filter((s) => s.name.startsWith("adapter "));
  const messageRows = rows.filter((r) => r.kind === "message");
  const adapterRows = rows.filter((r) => r.kind === "adapter");
  expect(deliveries).toHaveLength(messageRows.length);
  expect(adapters).toHaveLength(adapterRows.length);
  // Every span of the execution is in its one trace.
  expect(
    spans
      .filter((s) => attr(s, "factflow.execution.id") === executionId)
      .every((s) => s.spanContext().traceId === traceId),
  ).toBe(true);

  const deliveryOf = new Map(deliveries.map((s) => [attr(s, "messaging.message.id") as string, s]));
  const adapterOf = new Map(adapters.map((s) => [attr(s, "factflow.lineage.id") as string, s]));
  for (const row of messageRows) {
    const span = deliveryOf.get(row.messageId);
    expect(span, `a delivery span for message ${row.messageId}`).toBeDefined();
    expect(attr(span as ReadableSpan, "factflow.route")).toBe(row.route);
    expect(attr(span as ReadableSpan, "factflow.outcome")).toBe("acknowledged");
    // The message's producer: the adapter row it descends from, or the execution (a seed message).
    const producer = row.parentId === undefined ? execution : adapterOf.get(row.parentId);
    expect(producer, `the producer span of message ${row.messageId}`).toBeDefined();
    expect(parentOf(span as ReadableSpan)).toBe(idOf(producer as ReadableSpan));
  }
  for (const row of adapterRows) {
    const span = adapterOf.get(row.id);
    expect(span, `an adapter span for lineage row ${row.id}`).toBeDefined();
    expect(attr(span as ReadableSpan, "factflow.adapter")).toBe(row.adapter);
    expect(parentOf(span as ReadableSpan)).toBe(idOf(deliveryOf.get(row.messageId) as ReadableSpan));
  }
  return { execution: execution as ReadableSpan, deliveries, adapters };
}

/** Polls until `check` returns true (generous; no upper-bound timing assertion). */
export async function eventually(check: () => boolean | Promise<boolean>, what: string, ms = 60_000) {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The spans of one trace as an indented tree (name, key attributes, links), for docs and debugging. */
export function traceTree(spans: readonly ReadableSpan[], traceId: string): string {
  const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);
  const ids = new Set(inTrace.map(idOf));
  const children = new Map<string | undefined, ReadableSpan[]>();
  for (const span of inTrace) {
    const parent = parentOf(span);
    const key = parent !== undefined && ids.has(parent) ? parent : undefined;
    children.set(key, [...(children.get(key) ?? []), span]);
  }
  const shortId = (id: string) => id.slice(0, 8);
  const lines: string[] = [];
  const walk = (parent: string | undefined, depth: number) => {
    const list = (children.get(parent) ?? []).sort((a, b) =>
      a.startTime[0] - b.startTime[0] === 0
        ? a.startTime[1] - b.startTime[1]
        : a.startTime[0] - b.startTime[0],
    );
    for (const span of list) {
      const a = span.attributes;
      const facts = [
        a["factflow.outcome"] === undefined ? undefined : `outcome=${a["factflow.outcome"]}`,
        a["factflow.delivery.attempt"] === undefined
          ? undefined
          : `attempt=${a["factflow.delivery.attempt"]}`,
        a["messaging.message.id"] === undefined
          ? undefined
          : `message=${shortId(String(a["messaging.message.id"]))}`,
        a["factflow.emitted"] === undefined ? undefined : `emitted=${a["factflow.emitted"]}`,
        a["factflow.batch.members"] === undefined ? undefined : `batch=${a["factflow.batch.members"]}`,
        span.links.length === 0
          ? undefined
          : `links=[${span.links.map((l) => shortId(l.context.spanId)).join(",")}]`,
      ].filter((f) => f !== undefined);
      lines.push(`${"  ".repeat(depth)}${span.name} [${shortId(idOf(span))}] ${facts.join(" ")}`.trimEnd());
      walk(idOf(span), depth + 1);
    }
  };
  walk(undefined, 0);
  return lines.join("\n");
}
