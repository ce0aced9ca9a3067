import { adapters } from "@factflow/adapters";
import type { LineageProtocol, LineageUpdate } from "@factflow/protocols";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import {
  blocks,
  forwardingLineage,
  type Harness,
  memoryStorage,
  openHarness,
  testAdapters,
  waitFor,
} from "./harness.js";

const FAN = `
name: mark
init:
  route: split
  message: { items: [1, 2, 3, 4, 5, 6] }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: n } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 3 }
    adapters: [{ type: json_transform, config: { set: { seen: true } } }]
`;

const SLOW = `
name: slow
init:
  route: slow
  message: { n: 1 }
routes:
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: block }]
`;

/** The lineage store, with every update it is asked for written down. */
function watched(lineage: LineageProtocol): { lineage: LineageProtocol; updates: [string, LineageUpdate][] } {
  const updates: [string, LineageUpdate][] = [];
  const wrapper = forwardingLineage(lineage, {
    update: (id, change) => {
      updates.push([id, change]);
      lineage.update(id, change);
    },
  });
  return { lineage: wrapper, updates };
}

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  await h?.close();
});
afterEach(() => {
  blocks.released = false;
});

function engineWith(lineage: LineageProtocol, processingMarkMs: number, strictLineage = true) {
  return createEngine({
    queue: h.queue,
    lineage,
    executions: h.db.executions,
    storage: memoryStorage(),
    adapters: [...adapters, ...testAdapters],
    strictLineage,
    processingMarkMs,
  });
}

describe("the processing mark of message rows", () => {
  it("skips `processing` for deliveries that settle before the sweep; the final row carries the attempt", async () => {
    const { lineage, updates } = watched(h.db.lineage);
    const engine = engineWith(lineage, 60_000);
    try {
      const config = await loadPipelineConfig(FAN, { registry: engine.registry });
      const record = await engine.service.create({ config });
      expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
      expect(updates.filter(([, u]) => u.status === "processing")).toEqual([]);
      const messages = (await h.db.lineage.rows(record.id, { kind: "message" })).items;
      expect(messages).toHaveLength(7);
      expect(messages.every((r) => r.status === "completed" && r.attempt === 1)).toBe(true);
      // One final update per message row, each with the attempt it was handled in.
      const messageIds = new Set(messages.map((r) => r.id));
      const finals = updates.filter(([id, u]) => messageIds.has(id) && u.status === "completed");
      expect(finals).toHaveLength(7);
      expect(finals.every(([, u]) => u.attempt === 1 && typeof u.finishedAt === "string")).toBe(true);
    } finally {
      await engine.shutdown();
    }
  });

  it("marks a delivery still in flight at the sweep `processing` (once), then closes it after", async () => {
    const { lineage, updates } = watched(h.db.lineage);
    const engine = engineWith(lineage, 20, false);
    try {
      const config = await loadPipelineConfig(SLOW, { registry: engine.registry });
      const record = await engine.service.create({ config });
      const row = await waitFor(async () => {
        const items = (await h.db.lineage.rows(record.id, { kind: "message" })).items;
        return items.find((r) => r.status === "processing");
      }, "the blocked message's row to be marked processing");
      expect(row.attempt).toBe(1);
      // Later sweeps leave it alone: it is marked once.
      await new Promise((r) => setTimeout(r, 100));
      expect(updates.filter(([id, u]) => id === row.id && u.status === "processing")).toHaveLength(1);
      blocks.released = true;
      expect(await engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
      const [closed] = (await h.db.lineage.rows(record.id, { kind: "message" })).items;
      expect(closed).toMatchObject({ id: row.id, status: "completed", attempt: 1 });
      const order = updates.filter(([id]) => id === row.id).map(([, u]) => u.status);
      expect(order).toEqual(["processing", "completed"]);
    } finally {
      await engine.shutdown();
    }
  });
});
