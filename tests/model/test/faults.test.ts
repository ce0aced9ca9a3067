import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { createRabbitMqProvider } from "@factflow/infra-rabbitmq";
import { createFaultProxy, type FaultProxy, probeTcp } from "@factflow/infra-testkit";
import { openLineageDatabase } from "@factflow/lineage";
import type { QueueProtocol } from "@factflow/protocols";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { differences } from "./harness/check.js";
import { createDatabase, DATABASE_URL, RABBITMQ_URL } from "./harness/databases.js";
import { shapeArbitrary } from "./harness/generator.js";
import { sinkWatchers } from "./harness/model-adapters.js";
import { expectedOutcome, totalArrivals } from "./harness/oracle.js";
import { type ModelRun, openModelRun } from "./harness/runner.js";
import { modelSettings } from "./harness/settings.js";
import type { Shape } from "./harness/shape.js";
import { toPipelineConfig } from "./harness/to-config.js";

// Generated shapes with a connection cut in the middle of each run, checked against the same oracle
// as a run without faults. A cut loses no message and adds no sink duplicate: a delivery whose ack
// was lost comes back redelivered, and the process's delivery ledger acknowledges it without running
// the route again (docs/engine.md, "Duplicates: effectively once per hop"). So the check is exact, the
// same as without faults.

const settings = modelSettings();
const seed = settings.seed ?? 20261205;
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Shapes that sink at least 8 keys (so there is a middle to cut in), small enough for a broker. */
function faultShapes(count: number, maxArrivals: number): Shape[] {
  return fc
    .sample(shapeArbitrary({ priorities: true, fifo: true, orderedGroups: true, maxArrivals }), {
      numRuns: count * 20,
      seed,
    })
    .filter((shape) => {
      const expected = expectedOutcome(shape);
      const sunk = Object.values(expected.routes).reduce((n, o) => n + o.sunk.length, 0);
      return sunk >= 8 && totalArrivals(expected) <= maxArrivals;
    })
    .slice(0, count);
}

/** Resolves once the execution's sinks hold `keys` keys, or when it ends first. */
function whenSunk(model: ModelRun, executionId: string, keys: number): Promise<"reached" | "ended"> {
  return new Promise((resolve) => {
    const watch = (id: string, total: number) => {
      if (id !== executionId || total < keys) return;
      sinkWatchers.delete(watch);
      resolve("reached");
    };
    sinkWatchers.add(watch);
    void model.engine.service.waitForEnd(executionId, 600_000).then(() => {
      sinkWatchers.delete(watch);
      resolve("ended");
    });
  });
}

/** The proxy's target, from a service URL. */
function targetOf(url: string) {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port) };
}

/** `url` with its host and port replaced by the proxy's. */
function through(url: string, proxy: FaultProxy): string {
  const proxied = new URL(url);
  proxied.hostname = proxy.host;
  proxied.port = String(proxy.port);
  return proxied.toString();
}

interface FaultSlice {
  readonly name: string;
  /** Cases in a default run (the CI budget); `--runs N` soaks. */
  readonly runs: number;
  /** The service the proxy stands in front of. */
  readonly service: string;
  /** Opens the engine with the proxy in place. */
  open(proxy: FaultProxy): Promise<{ model: ModelRun; close(): Promise<void> }>;
}

const SLICES: readonly FaultSlice[] = [
  {
    name: "RabbitMQ connection cut",
    // Each cut costs a reconnect (heartbeat 2 s, then the provider's backoff): about 10 s a case.
    runs: 3,
    service: RABBITMQ_URL,
    async open(proxy) {
      const queue: QueueProtocol = createRabbitMqProvider({
        url: through(RABBITMQ_URL, proxy),
        heartbeatSeconds: 2,
        publishTimeoutMs: 10_000,
      });
      const model = await openModelRun(queue);
      return { model, close: () => model.close() };
    },
  },
  {
    name: "PostgreSQL connection cut (lineage)",
    runs: 5,
    service: DATABASE_URL,
    async open(proxy) {
      const database = await createDatabase("factflow_model_faults");
      cleanups.push(database.drop);
      const lineage = await openLineageDatabase({ databaseUrl: through(database.url, proxy) });
      const model = await openModelRun(createEmbeddedProvider({ mode: "memory" }), { lineage });
      return {
        model,
        async close() {
          await model.close();
          await lineage.close();
        },
      };
    },
  },
];

describe.each(SLICES)("model with faults: $name", (slice) => {
  const runs = settings.runs ?? slice.runs;
  it(`each generated case matches the oracle across a cut (seed ${seed}, ${runs} cases)`, async (ctx) => {
    const target = targetOf(slice.service);
    const probe = await probeTcp(target.host, target.port, 1000);
    if (!probe.ok) {
      const why = `${target.host}:${target.port} unreachable (${probe.reason})`;
      if (required) throw new Error(`[model] ${slice.name}: ${why}`);
      return ctx.skip(why);
    }
    const proxy = await createFaultProxy({ target });
    cleanups.push(() => proxy.close());
    const { model, close } = await slice.open(proxy);
    cleanups.push(close);
    const shapes = faultShapes(runs, 150);
    let cuts = 0;
    for (const [index, shape] of shapes.entries()) {
      const expected = expectedOutcome(shape);
      const sunk = Object.values(expected.routes).reduce((n, o) => n + o.sunk.length, 0);
      // The cut lands after a share of the sink's keys drawn from the case: early, middle or late.
      const at = Math.max(1, Math.floor((sunk * (1 + ((index * 7 + (seed >>> 0)) % 8))) / 10));
      const observed = await model.run(shape, async (id) => {
        if ((await whenSunk(model, id, at)) === "reached") cuts += proxy.cutAll() > 0 ? 1 : 0;
      });
      const problems = differences(shape, expected, observed);
      expect(
        problems,
        `case ${index} (cut after ${at} of ${sunk} sunk keys); its config:\n${JSON.stringify(toPipelineConfig(shape), null, 2)}`,
      ).toEqual([]);
    }
    console.log(`[model] ${slice.name}: ${shapes.length} cases, ${cuts} cut mid-run, seed ${seed}`);
    expect(cuts).toBeGreaterThan(0);
  });
});
