import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import type {
  AdapterDefinition,
  OutboundMessage,
  StartSpanOptions,
  TraceCarrier,
  Tracer,
  TraceSpan,
} from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { forwarding, memoryStorage } from "./harness.js";

const PIPELINE = `
name: seam
init:
  route: a
  message: { items: [1, 2, 3] }
routes:
  a:
    inbound: { queue: seam.a }
    adapters:
      - type: split
        config: { field: items }
    outbound: [seam.b]
  b:
    inbound: { queue: seam.b, concurrency: 3 }
    adapters:
      - type: passthrough
    outbound: []
`;

interface Recorded {
  readonly id: string;
  readonly name: string;
  readonly parent: string | undefined;
  readonly kind: string;
  ended: boolean;
  attributes: Record<string, unknown>;
}

/** A tracer on the seam alone (no OpenTelemetry): span ids in `traceparent`, parents recorded. */
function recordingTracer(): Tracer & { spans: Recorded[] } {
  const spans: Recorded[] = [];
  let next = 0;
  const parentFrom = (carrier: TraceCarrier | undefined) => carrier?.traceparent?.split("-")[2];
  return {
    spans,
    startSpan(name: string, options: StartSpanOptions = {}): TraceSpan {
      const id = (++next).toString(16).padStart(16, "0");
      const parent =
        options.parent !== undefined ? parentFrom(headersOf(options.parent)) : parentFrom(options.carrier);
      const record: Recorded = {
        id,
        name,
        parent,
        kind: options.kind ?? "internal",
        ended: false,
        attributes: { ...options.attributes },
      };
      spans.push(record);
      return {
        inject: (headers) => {
          headers.traceparent = `00-${"a".repeat(32)}-${id}-01`;
        },
        setAttributes: (attributes) => Object.assign(record.attributes, attributes),
        addLink: () => {},
        run: (work) => work(),
        end: (outcome) => {
          record.ended = true;
          Object.assign(record.attributes, outcome.attributes);
        },
      };
    },
  };
}

function headersOf(span: TraceSpan): Record<string, string> {
  const headers: Record<string, string> = {};
  span.inject(headers);
  return headers;
}

const RETRIED = `
name: retried
settings:
  retry: { max_attempts: 3, initial_delay_ms: 20, multiplier: 1, max_delay_ms: 20 }
init:
  route: a
  message: { n: 1 }
routes:
  a:
    inbound: { queue: retried.a }
    adapters:
      - type: fails_first
    outbound: []
`;

/** Fails the first attempt of every message (retryable), passes the next. */
const failsFirst: AdapterDefinition = {
  type: "fails_first",
  description: "fails attempt 1",
  create: () => ({
    type: "fails_first",
    process: (ctx) =>
      ctx.attempt === 1 ? { data: null, error: "first attempt fails" } : { data: ctx.message },
  }),
};

async function run(tracer: Tracer | undefined, yaml = PIPELINE) {
  const published: OutboundMessage[] = [];
  const inner = createEmbeddedProvider({ mode: "memory" });
  const queue = forwarding(inner, {
    publish: (destination, message) => {
      published.push(message);
      return inner.publish(destination, message);
    },
  });
  await queue.connect();
  const db = await openLineageDatabase({ memory: true });
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: db.executions,
    storage: memoryStorage(),
    adapters: [...builtins, failsFirst],
    ...(tracer === undefined ? {} : { tracer }),
  });
  try {
    const config = await loadPipelineConfig(yaml, { registry: engine.registry });
    const record = await engine.service.create({ config });
    await engine.service.waitForEnd(record.id);
    expect((await engine.service.get(record.id)).status).toBe("completed");
    return { published, executionId: record.id };
  } finally {
    await engine.shutdown();
    await queue.close();
    await db.close();
  }
}

describe("the engine's tracing seam", () => {
  it("is off without a tracer: no trace context is added to any message", async () => {
    const { published } = await run(undefined);
    expect(published).toHaveLength(4);
    for (const message of published) {
      expect(message.traceparent).toBeUndefined();
      expect(Object.keys(message.headers ?? {}).some((k) => k === "traceparent" || k === "baggage")).toBe(
        false,
      );
    }
  });

  it("with a tracer: execution → delivery → adapter spans, each message carrying its producer's context", async () => {
    const tracer = recordingTracer();
    const { published, executionId } = await run(tracer);
    const spans = tracer.spans;
    expect(spans.every((s) => s.ended)).toBe(true);
    const execution = spans.filter((s) => s.name === "execution seam");
    expect(execution).toHaveLength(1);
    expect(execution[0]?.attributes["factflow.execution.id"]).toBe(executionId);
    const deliveries = spans.filter((s) => s.name.startsWith("route "));
    const adapters = spans.filter((s) => s.name.startsWith("adapter "));
    expect(deliveries.map((s) => s.name).sort()).toEqual(["route a", "route b", "route b", "route b"]);
    expect(deliveries.every((s) => s.kind === "consumer")).toBe(true);
    expect(adapters).toHaveLength(4);
    const split = adapters.find((s) => s.name === "adapter split");
    // The seed's delivery is a child of the execution; the fan-out children of the split adapter.
    expect(deliveries.find((s) => s.name === "route a")?.parent).toBe(execution[0]?.id);
    for (const child of deliveries.filter((s) => s.name === "route b")) expect(child.parent).toBe(split?.id);
    // Every adapter span is inside its delivery's span.
    for (const adapter of adapters) expect(deliveries.map((d) => d.id)).toContain(adapter.parent);
    // Every published message carried a traceparent.
    expect(published.every((m) => m.traceparent !== undefined)).toBe(true);
  });

  it("gives each attempt its own delivery span under the same parent, with its outcome", async () => {
    const tracer = recordingTracer();
    await run(tracer, RETRIED);
    const deliveries = tracer.spans.filter((s) => s.name === "route a");
    expect(
      deliveries.map((s) => [s.attributes["factflow.delivery.attempt"], s.attributes["factflow.outcome"]]),
    ).toEqual([
      [1, "failed"],
      [2, "acknowledged"],
    ]);
    const execution = tracer.spans.find((s) => s.name === "execution retried");
    expect(deliveries.every((s) => s.parent === execution?.id)).toBe(true);
    const adapters = tracer.spans.filter((s) => s.name === "adapter fails_first");
    expect(adapters.map((s) => s.attributes["factflow.outcome"])).toEqual(["failed", "completed"]);
  });
});
