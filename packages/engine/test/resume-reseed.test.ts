import { rmSync } from "node:fs";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { AdapterDefinition } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createEngine, type Engine, loadPipelineConfig } from "../src/index.js";
import { blocks, memoryStorage, seen, tempDir, testAdapters, waitFor } from "./harness.js";

const items = ["a", "b", "c", "d", "e"];

// `split` fans out to `sink` (runs at once) and `slow` (blocks until released), so the execution
// is still running when the split message and every sink message have been acknowledged.
const config = `
name: resume-reseed
init: { route: split, message: { items: [${items.join(", ")}] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [sink.in, slow.in]
  sink:
    inbound: { queue: sink.in }
    adapters: [{ type: sink }]
  slow:
    inbound: { queue: slow.in, concurrency: 5 }
    adapters: [{ type: block }]
`;

/** While `on`, the `fail-while-flagged` adapter fails every message transiently. */
const failing = { on: false };
const failWhileFlagged: AdapterDefinition = {
  type: "fail-while-flagged",
  description: "fails transiently while the test's flag is on",
  create: () => ({
    type: "fail-while-flagged",
    process: (ctx) =>
      failing.on ? { data: null, error: "failing on purpose", retryable: true } : { data: ctx.message },
  }),
};

/** One "process": a file-mode embedded broker and PGlite lineage over `dir`, and an engine. */
async function openProcess(
  dir: string,
): Promise<{ engine: Engine; db: LineageDatabase; close(): Promise<void> }> {
  const db = await openLineageDatabase({ dataDir: join(dir, "db") });
  const queue = createEmbeddedProvider({ mode: "file", dataDir: join(dir, "queue") });
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: db.executions,
    storage: memoryStorage(),
    adapters: [...builtins, ...testAdapters, failWhileFlagged],
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

describe("resume re-seeds open message rows", () => {
  it("completes an execution whose acknowledged message lost its `completed` update, running each item once", async () => {
    const dir = tempDir();
    try {
      // First process: run until the split message and all sink messages are acknowledged.
      const first = await openProcess(dir);
      let id: string;
      let splitRow: string;
      try {
        const loaded = await loadPipelineConfig(config, { registry: first.engine.registry });
        id = (await first.engine.service.create({ config: loaded })).id;
        const executionId = id;
        await waitFor(
          () =>
            first.engine.manager.get(executionId)?.counters().slow?.inFlight === items.length &&
            (seen.get(executionId) ?? []).filter((s) => s.route === "sink").length === items.length,
          "every sink item done and every slow item in flight",
          20_000,
        );
        await first.db.lineage.flush();
        const split = (await first.db.lineage.rows(id, { kind: "message", route: "split" })).items;
        expect(split.map((r) => r.status)).toEqual(["completed"]);
        splitRow = (split[0] as { id: string }).id;
        // The window: the broker has the ack, the `completed` update never became durable.
        first.db.lineage.update(splitRow, { status: "pending", attempt: 1 });
        await first.db.lineage.flush();
      } finally {
        // Stop without finishing the row (the blocked slow deliveries go back to the broker).
        await first.close();
      }

      // Second process over the same data: nothing in the broker will ever close the split row.
      blocks.released = true;
      const second = await openProcess(dir);
      try {
        expect((await second.engine.service.get(id)).status).toBe("running");
        expect((await second.db.lineage.messageStatus?.(id, splitRow))?.status).toBe("pending");
        await second.engine.service.resume(id);
        const end = await second.engine.service.waitForEnd(id, 60_000);
        if (end !== "completed") {
          const open = (await second.db.lineage.rows(id, { limit: 1000 })).items
            .filter((r) => r.status === "pending" || r.status === "processing")
            .map((r) => `${r.kind} ${r.route} ${r.status} attempt ${r.attempt}`);
          expect.fail(`execution is ${end}; open rows: ${open.join(", ")}`);
        }
        // The re-run split republished the same children; the sink ones were found settled.
        const sunk = (seen.get(id) ?? []).filter((s) => s.route === "sink");
        expect(sunk.map((s) => (s.body as { item: string }).item).sort()).toEqual(items);
        expect(await second.db.lineage.countOpen(id)).toBe(0);
        const messages = (await second.db.lineage.rows(id, { kind: "message", limit: 1000 })).items;
        expect(messages.filter((r) => r.status === "completed")).toHaveLength(1 + 2 * items.length);
      } finally {
        await second.close();
      }
    } finally {
      blocks.released = false;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);

  it("skips the delayed original of a message whose re-seeded copy already ran", async () => {
    // In the first process the message fails once; its retry waits in the broker when the process
    // stops. After resume the re-seeded copy runs at once and settles the message; the original then
    // comes out of its delay and must be acknowledged as a duplicate. `slow` keeps the execution
    // open until that happened.
    const retrying = `
name: resume-reseed-retry
init: { route: flaky, message: { n: 1 } }
routes:
  flaky:
    inbound: { queue: flaky.in }
    retry: { max_attempts: 4, initial_delay_ms: 1500, multiplier: 1 }
    adapters: [{ type: fail-while-flagged }, { type: sink }]
    outbound: [slow.in]
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: block }]
`;
    const dir = tempDir();
    try {
      failing.on = true;
      const first = await openProcess(dir);
      let id: string;
      try {
        const loaded = await loadPipelineConfig(retrying, { registry: first.engine.registry });
        id = (await first.engine.service.create({ config: loaded })).id;
        const executionId = id;
        await waitFor(
          async () => {
            await first.db.lineage.flush();
            const rows = (await first.db.lineage.rows(executionId, { kind: "message" })).items;
            return rows.length === 1 && rows[0]?.status === "pending" && rows[0]?.attempt === 2;
          },
          "the message to wait for its second attempt",
          10_000,
        );
      } finally {
        await first.close();
      }
      expect(seen.get(id)).toBeUndefined();

      failing.on = false;
      const second = await openProcess(dir);
      try {
        await second.engine.service.resume(id);
        const executionId = id;
        await waitFor(
          () => second.engine.manager.get(executionId)?.counters().flaky?.duplicates === 1,
          "the delayed original to be acknowledged as a duplicate",
          15_000,
        );
        blocks.released = true;
        expect(await second.engine.service.waitForEnd(id, 60_000)).toBe("completed");
        expect((seen.get(id) ?? []).map((s) => s.route)).toEqual(["flaky"]);
        expect(await second.db.lineage.countOpen(id)).toBe(0);
      } finally {
        await second.close();
      }
    } finally {
      failing.on = false;
      blocks.released = false;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});
