import { rmSync } from "node:fs";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { LineageProtocol, LineageRow } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEngine, type Engine, loadPipelineConfig } from "../src/index.js";
import { blocks, memoryStorage, tempDir, testAdapters, waitFor } from "./harness.js";

const items = ["a", "b", "c", "d", "e"];

// `relay` publishes each item to `hold` with a plain outbound message: without strict lineage its
// message row is only queued in the writer (group commit) when the broker already has the message.
// `hold` blocks two at a time, so when the first process stops, two of its messages are in flight
// and three still wait in the queue.
const config = `
name: queued-row-crash
init: { route: split, message: { items: [${items.join(", ")}] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [relay.in]
  relay:
    inbound: { queue: relay.in }
    adapters: [{ type: passthrough }]
    outbound: [hold.in]
  hold:
    inbound: { queue: hold.in, concurrency: 2, prefetch: 2 }
    adapters: [{ type: block }, { type: sink }]
`;

/**
 * The writer of a process killed before its last commit: the `message` rows queued for `hold`
 * never reach the database, while everything else does.
 */
function losingHoldRows(lineage: LineageProtocol): LineageProtocol {
  return new Proxy(lineage, {
    get(target, property, receiver) {
      if (property === "record")
        return (row: LineageRow) => {
          if (row.kind === "message" && row.route === "hold") return;
          target.record(row);
        };
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** One "process": a file-mode embedded broker and PGlite lineage over `dir`, and an engine. */
async function openProcess(
  dir: string,
  wrap?: (lineage: LineageProtocol) => LineageProtocol,
): Promise<{ engine: Engine; db: LineageDatabase; close(): Promise<void> }> {
  const db = await openLineageDatabase({ dataDir: join(dir, "db") });
  const queue = createEmbeddedProvider({ mode: "file", dataDir: join(dir, "queue") });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: wrap === undefined ? db.lineage : wrap(db.lineage),
    executions: db.executions,
    storage: memoryStorage(),
    adapters: [...builtins, ...testAdapters],
    // As the server runs the embedded provider: outbound rows are recorded, not registered.
    strictLineage: false,
  });
  return {
    engine,
    db,
    async close() {
      await engine.shutdown();
      await queue.close();
      await db.close();
    },
  };
}

describe("message rows queued by a process that stopped", () => {
  it.each([
    ["died before committing them", true],
    ["stopped cleanly", false],
  ])(
    "leave every hop its message row when the process %s",
    async (_how, lost) => {
      const dir = tempDir();
      try {
        const first = await openProcess(dir, lost ? losingHoldRows : undefined);
        let id: string;
        try {
          blocks.released = false;
          const loaded = await loadPipelineConfig(config, { registry: first.engine.registry });
          id = (await first.engine.service.create({ config: loaded })).id;
          const executionId = id;
          await waitFor(() => {
            const counters = first.engine.manager.get(executionId)?.counters();
            return counters?.relay?.acknowledged === items.length && counters.hold?.inFlight === 2;
          }, "every relay message acknowledged and two hold messages in flight");
          await first.db.lineage.flush();
          expect((await first.db.lineage.rows(id, { route: "hold", kind: "message" })).total).toBe(
            lost ? 0 : items.length,
          );
        } finally {
          // The blocked deliveries go back to the broker; the three others never left it.
          await first.close();
        }

        blocks.released = true;
        const second = await openProcess(dir);
        try {
          await second.engine.service.resume(id);
          expect(await second.engine.service.waitForEnd(id, 60_000)).toBe("completed");
          await second.db.lineage.flush();
          const rows = (await second.db.lineage.rows(id, { limit: 1000 })).items;
          const held = rows.filter((r) => r.kind === "message" && r.route === "hold");
          expect(held.map((r) => (r.payload as { item: string }).item).sort()).toEqual(items);
          expect(held.every((r) => r.status === "completed")).toBe(true);
          // A rebuilt row hangs off the message row of the relay message it came from (the relay's
          // adapter row was queued just before it, so it may be lost too); a stored one keeps its
          // parent, the relay's adapter row.
          const parents = new Set(
            rows
              .filter((r) => r.route === "relay" && r.kind === (lost ? "message" : "adapter"))
              .map((r) => r.id),
          );
          expect(held.every((r) => r.parentId !== undefined && parents.has(r.parentId))).toBe(true);
          // Every parent named is stored.
          const ids = new Set(rows.map((r) => r.id));
          expect(rows.filter((r) => r.parentId !== undefined && !ids.has(r.parentId))).toEqual([]);
          // No adapter row points at a message without its row (the first process's blocked hops too).
          const withRow = new Set(rows.filter((r) => r.kind === "message").map((r) => r.messageId));
          expect(rows.filter((r) => r.kind === "adapter" && !withRow.has(r.messageId))).toEqual([]);
          // And the tree of a held message reaches the init message.
          const tree = (await second.db.lineage.tree(id, (held[0] as LineageRow).messageId)).items;
          expect(
            tree
              .filter((r) => r.kind === "message")
              .map((r) => r.route)
              .sort(),
          ).toEqual(["hold", "relay", "split"]);
          expect(await second.db.lineage.countOpen(id)).toBe(0);
        } finally {
          await second.close();
        }
      } finally {
        blocks.released = false;
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
