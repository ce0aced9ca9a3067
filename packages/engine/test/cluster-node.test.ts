import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openMemoryLineageDatabase } from "@factflow/lineage";
import type { AdapterDefinition, ExecutionStoreProtocol, JsonValue } from "@factflow/protocols";
import { afterEach, describe, expect, it } from "vitest";
import { createEngine, type Engine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage, waitFor } from "./harness.js";

// Cluster mode in one process: three engines ("servers") on one broker and one lineage store, each
// with its own ClusterNode, as `factflow serve` wires them (docs/deployment.md). tests/cluster runs
// the same with real processes, RabbitMQ, Artemis and PostgreSQL.

/** A ClusterStore over the memory execution store; leases are not exercised here. */
function memoryClusterStore(executions: ExecutionStoreProtocol) {
  return {
    heartbeatNode: async () => {},
    removeNode: async () => {},
    claimExpiredNodes: async () => [] as string[],
    adoptExecutions: async () => [] as string[],
    setExecutionOwner: async () => {},
    runningExecutionIds: async () =>
      (await executions.listExecutions({ status: "running", limit: 1000 })).items.map((e) => e.id),
  };
}

/** Which server's sink handled which item. */
const sunk: { server: string; item: JsonValue }[] = [];
const gate = { open: true };

function sinkOf(server: string): AdapterDefinition {
  return {
    type: "cluster-sink",
    description: "records the item and the server that handled it",
    create: () => ({
      type: "cluster-sink",
      async process(ctx) {
        while (!gate.open) {
          if (ctx.signal.aborted) throw ctx.signal.reason;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        sunk.push({ server, item: (ctx.message as { item: JsonValue }).item });
        await new Promise((resolve) => setTimeout(resolve, 2));
        return { data: null };
      },
    }),
  };
}

const yaml = `
name: cluster
init: { route: split, message: { items: [] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: 2, prefetch: 2 }
    adapters: [{ type: cluster-sink }]
`;

let engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines) await engine.shutdown({ cancel: true });
  engines = [];
  sunk.length = 0;
  gate.open = true;
});

async function cluster(size: number) {
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const db = openMemoryLineageDatabase();
  for (let i = 0; i < size; i++) {
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: [...builtins, sinkOf(`s${i}`)],
      maxConcurrent: 3,
      cluster: { nodeId: `s${i}`, store: memoryClusterStore(db.executions), pollMs: 30 },
    });
    await engine.cluster?.start();
    engines.push(engine);
  }
  const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
  return { db, config };
}

/** The terminal events `engine` reported for `id`. */
function terminals(engine: Engine, id: string): string[] {
  const types: string[] = [];
  engine.service.subscribe(id, (event) => {
    if (["completed", "failed", "cancelled"].includes(event.type)) types.push(event.type);
  })();
  return types;
}

describe("cluster mode: several engines on one broker and one store", () => {
  it("shares every execution's work; each completes once and every server reports it", async () => {
    const { db, config } = await cluster(3);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const items = Array.from({ length: 40 }, (_, n) => `e${i}:${n}`);
      const record = await engines[i % 3]!.service.create({ config, input: { items } });
      ids.push(record.id);
    }
    for (const id of ids) {
      await waitFor(
        async () => (await db.executions.getExecution(id))?.status !== "running",
        `end of ${id}`,
        30_000,
      );
      expect((await db.executions.getExecution(id))?.status).toBe("completed");
    }
    // Every server ran (or joined) every execution and reported exactly one terminal event.
    for (const engine of engines) {
      for (const id of ids) {
        await waitFor(() => terminals(engine, id).length > 0, `terminal event of ${id}`, 60_000);
        expect(terminals(engine, id)).toEqual(["completed"]);
      }
    }
    const items = sunk.map((s) => s.item);
    expect(items).toHaveLength(240);
    expect(new Set(items).size).toBe(240);
    // Joined executions do not count against a server's max_concurrent (3, with 6 running).
    expect(new Set(sunk.map((s) => s.server)).size).toBeGreaterThan(1);
  });

  it("a cancel on one server stops the execution on every server", async () => {
    const { db, config } = await cluster(3);
    gate.open = false;
    const record = await engines[0]!.service.create({
      config,
      input: { items: Array.from({ length: 20 }, (_, n) => n) },
    });
    await waitFor(() => engines.every((e) => e.manager.get(record.id) !== undefined), "every server joined");
    expect(await engines[2]!.service.cancel(record.id)).toBe("cancelled");
    for (const engine of engines) {
      await waitFor(() => engine.manager.get(record.id) === undefined, "stopped everywhere", 60_000);
      expect(terminals(engine, record.id)).toEqual(["cancelled"]);
    }
    expect((await db.executions.getExecution(record.id))?.status).toBe("cancelled");
  });
});

describe("cluster takeover: the broker's part", () => {
  it("asks the broker to hand each dead server's deliveries over once, and survives its failure", async () => {
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const db = openMemoryLineageDatabase();
    const expired = ["dead-1", "dead-2"];
    const claimed: string[] = [];
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: builtins,
      cluster: {
        nodeId: "live",
        store: { ...memoryClusterStore(db.executions), claimExpiredNodes: async () => expired.splice(0) },
        pollMs: 30,
        claimDeadNode: async (node) => {
          claimed.push(node);
          if (node === "dead-1") throw new Error("broker unreachable");
        },
      },
    });
    engines.push(engine);
    await engine.cluster?.start();
    await waitFor(() => claimed.length === 2, "both dead servers claimed");
    expect(claimed).toEqual(["dead-1", "dead-2"]);
  });
});
