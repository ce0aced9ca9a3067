import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import {
  blocks,
  type Harness,
  memoryStorage,
  openHarness,
  seen,
  tempDir,
  testAdapters,
  waitFor,
} from "./harness.js";

const withBatch = (timeoutMs: number) => `
name: fan-in
init: { route: split, message: { items: [a, b, c] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [collect.in, slow.in]
  collect:
    inbound: { queue: collect.in }
    adapters:
      - type: batch
        config: { size: 10, timeout_ms: ${timeoutMs} }
      - type: sink
  slow:
    inbound: { queue: slow.in, concurrency: 3 }
    adapters: [{ type: block }]
`;

const itemsOf = (executionId: string) =>
  (seen.get(executionId) ?? [])
    .flatMap((s) => (s.body as { items: { item: string }[] }).items.map((i) => i.item))
    .sort();

describe("stateful (fan-in) adapters", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await openHarness();
  });
  afterAll(async () => {
    blocks.released = true;
    await h?.close();
  });

  it("emits a partial batch when its timer fires, while other routes are still busy", async () => {
    blocks.released = false;
    const config = await loadPipelineConfig(withBatch(100), { registry: h.engine.registry });
    const record = await h.engine.service.create({ config });
    // The slow route is blocked, so only the timer can emit the batch.
    await waitFor(() => itemsOf(record.id).length === 3, "the timer to emit the batch", 60_000);
    expect((await h.engine.service.get(record.id)).status).toBe("running");
    expect(itemsOf(record.id)).toEqual(["a", "b", "c"]);
    blocks.released = true;
    expect(await h.engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
  });

  it("keeps held messages unsettled, so a process death before emission loses none of them", async () => {
    blocks.released = false;
    const dir = tempDir();
    const db = await openLineageDatabase({ dataDir: join(dir, "db") });
    const queueDir = join(dir, "queue");
    const open = async () => {
      const queue = createEmbeddedProvider({ mode: "file", dataDir: queueDir, fsync: false });
      await queue.connect();
      const engine = createEngine({
        queue,
        lineage: db.lineage,
        executions: db.executions,
        storage: memoryStorage(),
        adapters: [...builtins, ...testAdapters],
      });
      return { queue, engine };
    };
    try {
      const first = await open();
      const config = await loadPipelineConfig(withBatch(60_000), { registry: first.engine.registry });
      const record = await first.engine.service.create({ config });
      await waitFor(
        () => first.engine.manager.get(record.id)?.counters().collect?.held === 3,
        "three messages held in the batch",
      );
      expect(itemsOf(record.id)).toEqual([]);

      // The process dies: the broker goes away under the running handlers, nothing is emitted.
      await first.queue.close();
      await first.engine.shutdown();
      expect((await db.executions.getExecution(record.id))?.status).toBe("running");
      await db.lineage.flush();
      const abandoned = await db.lineage.rows(record.id, {
        kind: "adapter",
        status: "abandoned",
        route: "collect",
      });
      expect(abandoned.items.map((r) => r.error?.class)).toEqual([
        "DeliveryAbandoned",
        "DeliveryAbandoned",
        "DeliveryAbandoned",
      ]);

      // A new process over the same data directory resumes the execution.
      blocks.released = true;
      const second = await open();
      try {
        await second.engine.service.resume(record.id);
        expect(await second.engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
        expect(itemsOf(record.id)).toEqual(["a", "b", "c"]);
        expect(await db.lineage.countOpen(record.id)).toBe(0);
      } finally {
        await second.engine.shutdown();
        await second.queue.close();
      }
    } finally {
      await db.close();
    }
  });
});
