import { createRabbitMqProvider, type RabbitMqProvider } from "@factflow/infra-rabbitmq";
import { createFaultProxy, type FaultProxy, probeTcp } from "@factflow/infra-testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ExecutionEvent, loadPipelineConfig } from "../src/index.js";
import { type Harness, openHarness, seen, waitFor } from "./harness.js";

const ITEMS = 200;
const broker = new URL(process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672");
const target = { host: broker.hostname, port: Number(broker.port || 5672) };
const available = await probeTcp(target.host, target.port, 1000);
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
if (!available.ok && !required) {
  console.warn(
    `[factflow/engine] broker-faults tests skipped: RabbitMQ unreachable at ${target.host}:${target.port} (${available.reason}); set RABBITMQ_URL, or FACTFLOW_REQUIRE_SERVICES=1 to fail instead`,
  );
}

/** root fans ITEMS items out to `work` (a little slow, so deliveries are in flight at a cut) and on to `sink`. */
const pipeline = `
name: broker-faults
settings:
  max_handlers: 16
  retry: { max_attempts: 10, initial_delay_ms: 50, multiplier: 1 }
init:
  route: root
  message: { items: [${Array.from({ length: ITEMS }, (_, i) => i).join(", ")}] }
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 6, prefetch: 12 }
    adapters: [{ type: track }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: 6, prefetch: 12 }
    adapters: [{ type: sink }]
`;

describe.skipIf(!available.ok && !required)("engine on RabbitMQ with connection cuts", () => {
  let proxy: FaultProxy | undefined;
  let provider: RabbitMqProvider | undefined;
  let h: Harness | undefined;

  beforeAll(async () => {
    if (!available.ok)
      throw new Error(
        `[factflow/engine] FACTFLOW_REQUIRE_SERVICES=1 but RabbitMQ is unreachable at ${target.host}:${target.port}: ${available.reason}`,
      );
    proxy = await createFaultProxy({ target });
    const url = new URL(broker);
    url.hostname = proxy.host;
    url.port = String(proxy.port);
    provider = createRabbitMqProvider({
      url: url.toString(),
      heartbeatSeconds: 2,
      publishTimeoutMs: 10_000,
    });
    h = await openHarness({ queue: provider });
  });

  afterAll(async () => {
    await h?.engine.shutdown();
    await provider?.deleteDeclaredTopology().catch(() => undefined);
    await h?.close();
    await proxy?.close();
  });

  it(`delivers each of ${ITEMS} fanned-out items to the sink once in lineage, across two cuts`, async () => {
    const harness = h as Harness;
    const faults = proxy as FaultProxy;
    const config = await loadPipelineConfig(pipeline, { registry: harness.engine.registry });
    const record = await harness.engine.service.create({ config });
    const events: ExecutionEvent[] = [];
    const listening = (async () => {
      for await (const event of harness.engine.service.events(record.id, {
        signal: AbortSignal.timeout(120_000),
      }))
        events.push(event);
    })();
    const sinkCalls = () => (seen.get(record.id) ?? []).filter((c) => c.route === "sink").length;
    const cuts: number[] = [];
    for (const at of [Math.floor(ITEMS / 4), Math.floor(ITEMS / 2)]) {
      // Cut while deliveries are in flight, not before consumption started or after it ended.
      await waitFor(() => sinkCalls() >= at, `${at} sink deliveries`, 60_000);
      const cut = faults.cutAll();
      expect(cut, "the provider had a connection through the proxy to cut").toBeGreaterThan(0);
      cuts.push(sinkCalls());
    }
    await listening;
    const status = (await harness.engine.service.get(record.id)).status;
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    const duplicates = Object.entries(counters)
      .filter(([key]) => key.endsWith(".duplicates"))
      .reduce((sum, [, n]) => sum + n, 0);
    const messages = await harness.rows(record.id, "message");
    const sinkRows = messages.filter((r) => r.route === "sink");
    const completedAtSink = sinkRows.filter((r) => r.status === "completed").length;
    console.info(
      `[broker-faults] status ${status}; cuts after ${cuts.join(" and ")} sink deliveries; ` +
        `${faults.acceptedConnections()} connections through the proxy; sink adapter ran ${sinkCalls()} times for ${ITEMS} items; ` +
        `${sinkRows.length} sink message rows, ${completedAtSink} completed; duplicates skipped ${duplicates} ` +
        `(${Object.entries(counters)
          .filter(([key]) => key.endsWith(".duplicates"))
          .map(([k, n]) => `${k}=${n}`)
          .join(", ")}); provider redelivered ${provider?.counters().redelivered}`,
    );
    expect(status).toBe("completed");
    // One message row per item at the sink (deterministic ids: re-runs reuse rows), each completed.
    expect(sinkRows).toHaveLength(ITEMS);
    expect(completedAtSink).toBe(ITEMS);
    expect(new Set(sinkRows.map((r) => (r.payload as number) ?? -1)).size).toBe(ITEMS);
    // Handlers that finished while their channel was gone had their ack lost: those redeliveries
    // must have been recognised and acknowledged without running the route again.
    if ((provider?.counters().redelivered ?? 0) > 0)
      expect(duplicates, "redeliveries of settled messages skipped").toBeGreaterThan(0);
  }, 150_000);
});
