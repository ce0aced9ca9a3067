import { rmSync } from "node:fs";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import { describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage, tempDir, testAdapters } from "./harness.js";

const CHILDREN = 30_000;

const config = `
name: large-fan-out
init: { route: split }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: 16 }
    adapters: [{ type: passthrough }]
`;

describe("a fan-out larger than the lineage writer's queue", () => {
  it("waits for the database instead of dropping lineage writes, and completes with every row", async () => {
    const dir = tempDir();
    // A queue that holds a third of the children (above the engine's backlog bound of 4000 plus a
    // slice of 2000), and a hold of a few hundred rows: the fan-out must be recorded in slices as
    // the writer commits, as a 300 000-item one is with the defaults.
    const db = await openLineageDatabase({
      dataDir: join(dir, "db"),
      writer: { maxQueued: CHILDREN / 3, maxHeld: 500 },
    });
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: [...builtins, ...testAdapters],
      strictLineage: false,
    });
    try {
      const loaded = await loadPipelineConfig(config, { registry: engine.registry });
      const items = Array.from({ length: CHILDREN }, (_, i) => i);
      const { id } = await engine.service.create({ config: loaded, input: { items } });
      expect(await engine.service.waitForEnd(id, 300_000)).toBe("completed");
      await db.lineage.flush();
      expect(db.lineage.counters().lost).toBe(0);
      const sinks = await db.lineage.rows(id, { kind: "message", route: "sink", limit: 1 });
      expect(sinks.total).toBe(CHILDREN);
      const open = await db.lineage.rows(id, { status: "pending", limit: 1 });
      expect(open.total).toBe(0);
    } finally {
      await engine.shutdown();
      await queue.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
