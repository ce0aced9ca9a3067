import { join } from "node:path";
import { adapters } from "@factflow/adapters";
import type { ExecutionStoreProtocol, QueueProtocol } from "@factflow/protocols";
import { createFileStorage } from "@factflow/storage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { type Harness, memoryStorage, openHarness, seen, testAdapters } from "./harness.js";

const FAN_OUT_IN = `
name: fan
init:
  route: split
  message: { items: [1, 2, 3, 4, 5, 6, 7] }
routes:
  split:
    inbound: { queue: split.in }
    adapters:
      - type: split
        config: { field: items, as: n }
    outbound: [double.in]
  double:
    inbound: { queue: double.in, concurrency: 4 }
    adapters:
      - type: json_transform
        config: { set: { doubled: true } }
    outbound: [collect.in]
  collect:
    inbound: { queue: collect.in }
    adapters:
      - type: batch
        config: { size: 3, timeout_ms: 60000 }
      - type: sink
`;

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});

describe("a pipeline on the embedded provider with PGlite lineage", () => {
  it("fans out, fans in (full batches and the drained remainder) and completes", async () => {
    const { id, status, events } = await h.run(FAN_OUT_IN);
    expect(status).toBe("completed");
    const batches = (seen.get(id) ?? []).map((s) => s.body as { count: number; items: { n: number }[] });
    expect(batches.map((b) => b.count).sort()).toEqual([1, 3, 3]);
    expect(batches.flatMap((b) => b.items.map((i) => i.n)).sort()).toEqual([1, 2, 3, 4, 5, 6, 7]);

    // Events: started first, completed last, ids strictly increasing, progress in between.
    expect(events[0]?.type).toBe("started");
    expect(events.at(-1)?.type).toBe("completed");
    expect(events.map((e) => e.id)).toEqual(events.map((_, i) => i + 1));
    expect(events.some((e) => e.type === "route_progress")).toBe(true);

    // Lineage: 1 init + 7 children + 7 doubled (collect is a sink), all closed; one adapter row per invocation.
    const messages = await h.rows(id, "message");
    expect(messages).toHaveLength(15);
    expect(messages.every((r) => r.status === "completed")).toBe(true);
    expect(messages.filter((r) => r.route === "double").every((r) => r.parentId !== undefined)).toBe(true);
    const adapterRows = await h.rows(id, "adapter");
    expect(adapterRows.filter((r) => r.route === "double")).toHaveLength(7);
    expect(adapterRows.every((r) => r.status === "completed" && typeof r.inputHash === "string")).toBe(true);
    expect(await h.db.lineage.countOpen(id)).toBe(0);

    const record = await h.engine.service.get(id);
    expect(record.status).toBe("completed");
    expect(record.counters["double.acknowledged"]).toBe(7);
    expect(record.configSnapshot.name).toBe("fan");
  });

  it("runs the same pipeline with strict lineage (every publish registered durably first)", async () => {
    const strict = createEngine({
      queue: h.queue,
      lineage: h.db.lineage,
      executions: h.db.executions,
      storage: memoryStorage(),
      adapters: [...adapters, ...testAdapters],
      strictLineage: true,
    });
    try {
      const config = await loadPipelineConfig(FAN_OUT_IN, { registry: strict.registry });
      const record = await strict.service.create({ config });
      expect(await strict.service.waitForEnd(record.id, 60_000)).toBe("completed");
      const messages = await h.rows(record.id, "message");
      expect(messages).toHaveLength(15);
      expect(messages.every((r) => r.status === "completed")).toBe(true);
    } finally {
      await strict.shutdown();
    }
  });

  it("ends in the order: stop subscriptions, then mark the row completed, then emit the event", async () => {
    const order: string[] = [];
    const queue: QueueProtocol = {
      name: h.queue.name,
      capabilities: h.queue.capabilities,
      admin: h.queue.admin,
      connect: () => h.queue.connect(),
      close: () => h.queue.close(),
      counters: () => h.queue.counters(),
      publish: (destination, message) => h.queue.publish(destination, message),
      async subscribe(destination, handler, options) {
        const subscription = await h.queue.subscribe(destination, handler, options);
        return {
          destination: subscription.destination,
          name: subscription.name,
          async unsubscribe() {
            await subscription.unsubscribe();
            order.push("unsubscribed");
          },
        };
      },
    };
    const store = h.db.executions;
    const executions: ExecutionStoreProtocol = {
      saveConfig: (...args) => store.saveConfig(...args),
      getConfig: (...args) => store.getConfig(...args),
      listConfigs: () => store.listConfigs(),
      createExecution: (...args) => store.createExecution(...args),
      getExecution: (...args) => store.getExecution(...args),
      listExecutions: (...args) => store.listExecutions(...args),
      deleteExecutionsBefore: (...args) => store.deleteExecutionsBefore(...args),
      close: () => store.close(),
      async finishExecution(...args) {
        const changed = await store.finishExecution(...args);
        order.push(`row ${args[1]}`);
        return changed;
      },
    };
    const engine = createEngine({
      queue,
      lineage: h.db.lineage,
      executions,
      storage: memoryStorage(),
      adapters: [...adapters, ...testAdapters],
    });
    try {
      const config = await loadPipelineConfig(FAN_OUT_IN, { registry: engine.registry });
      const record = await engine.service.create({ config });
      engine.service.subscribe(record.id, (event) => {
        if (event.type === "completed") order.push("event completed");
      });
      expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
      expect(order).toEqual([
        "unsubscribed",
        "unsubscribed",
        "unsubscribed",
        "row completed",
        "event completed",
      ]);
    } finally {
      await engine.shutdown();
    }
  });

  it("links artefacts to lineage: the sidecar names the adapter row that wrote it", async () => {
    const storage = createFileStorage({ root: join(h.dir, "artefacts") });
    const engine = createEngine({
      queue: h.queue,
      lineage: h.db.lineage,
      executions: h.db.executions,
      storage,
      adapters: [...adapters, ...testAdapters],
    });
    try {
      const config = await loadPipelineConfig(
        `
name: artefacts
init: { route: split, message: { docs: [{ name: one }, { name: two }] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: docs } }]
    outbound: [store.in]
  store:
    inbound: { queue: store.in }
    adapters: [{ type: write_artefact, config: { key: "docs/{executionId}/{body.name}.json" } }]
`,
        { registry: engine.registry },
      );
      const record = await engine.service.create({ config });
      expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
      const stored = await storage.list(`docs/${record.id}/`);
      expect(stored.map((a) => a.key).sort()).toEqual([
        `docs/${record.id}/one.json`,
        `docs/${record.id}/two.json`,
      ]);
      const rows = await h.rows(record.id, "adapter");
      for (const artefact of stored) {
        const row = rows.find((r) => r.id === artefact.lineageId);
        expect(row?.adapter).toBe("write_artefact");
        expect(row?.outputKeys).toEqual([artefact.key]);
        expect(artefact.executionId).toBe(record.id);
      }
    } finally {
      await engine.shutdown();
    }
  });
});
