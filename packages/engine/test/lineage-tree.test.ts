import { rmSync } from "node:fs";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openLineageDatabase } from "@factflow/lineage";
import type { LineageRow } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage, tempDir, testAdapters } from "./harness.js";

// Five routes, two fan-outs, a chain of two adapters on the first and third route, and a fan-in:
// every hop a message takes is one more level of ancestors in the lineage tree.
const config = `
name: lineage-tree
init: { route: discover, message: { files: [{ sections: [1, 2] }, { sections: [3] }] } }
routes:
  discover:
    inbound: { queue: discover.in }
    adapters: [{ type: passthrough }, { type: split, config: { field: files } }]
    outbound: [files.in]
  split:
    inbound: { queue: files.in }
    adapters: [{ type: split, config: { field: sections } }]
    outbound: [sections.in]
  enrich:
    inbound: { queue: sections.in }
    adapters: [{ type: passthrough }, { type: sink }]
    outbound: [batch.in]
  batch:
    inbound: { queue: batch.in, concurrency: 3 }
    adapters: [{ type: batch, config: { size: 3, timeout_ms: 600000 } }]
    outbound: [write.in]
  write:
    inbound: { queue: write.in }
    adapters: [{ type: sink }]
`;

/** The routes of the message rows in a tree, in route order, one entry per message. */
function messageRoutes(rows: readonly LineageRow[]): string[] {
  const order = ["discover", "split", "enrich", "batch", "write"];
  return rows
    .filter((r) => r.kind === "message")
    .map((r) => r.route)
    .sort((a, b) => order.indexOf(a) - order.indexOf(b));
}

describe.each([
  ["PGlite", false],
  ["memory", true],
])("the lineage tree of an engine run (%s lineage)", (_name, memory) => {
  it("reaches every ancestor up to the init message, from any message", async () => {
    const dir = tempDir();
    const db = await openLineageDatabase({ dataDir: join(dir, "db"), memory });
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: [...builtins, ...testAdapters],
    });
    try {
      const loaded = await loadPipelineConfig(config, { registry: engine.registry });
      const { id } = await engine.service.create({ config: loaded });
      expect(await engine.service.waitForEnd(id, 60_000)).toBe("completed");
      await db.lineage.flush();
      const messages = (await db.lineage.rows(id, { kind: "message", limit: 1000 })).items;
      const byRoute = (route: string) => messages.filter((r) => r.route === route);
      expect(byRoute("discover")).toHaveLength(1);
      const root = byRoute("discover")[0] as LineageRow;
      const leaf = byRoute("write")[0] as LineageRow;
      expect(byRoute("write")).toHaveLength(1);

      // The written batch descends from the root through one file, one section and one batch
      // member (the batch's leader: the member whose delivery carried the batch on).
      const leafTree = (await db.lineage.tree(id, leaf.messageId)).items;
      expect(leafTree.map((r) => r.id)).toContain(root.id);
      expect(messageRoutes(leafTree)).toEqual(["discover", "split", "enrich", "batch", "write"]);
      // Every adapter row of every ancestor message is in the tree as well.
      const adapters = leafTree.filter((r) => r.kind === "adapter").map((r) => `${r.route}/${r.adapter}`);
      expect(adapters).toEqual(
        expect.arrayContaining([
          "discover/passthrough",
          "discover/split",
          "split/split",
          "enrich/passthrough",
          "enrich/sink",
          "batch/batch",
          "write/sink",
        ]),
      );

      // From every section: up to the root, down to nothing but its own batch hop.
      for (const section of byRoute("enrich")) {
        const tree = (await db.lineage.tree(id, section.messageId)).items;
        expect(tree.map((r) => r.id)).toContain(root.id);
        expect(messageRoutes(tree).slice(0, 3)).toEqual(["discover", "split", "enrich"]);
        // Its own file only, not the other one.
        expect(messageRoutes(tree).filter((r) => r === "split")).toHaveLength(1);
      }
    } finally {
      await engine.shutdown();
      await queue.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
