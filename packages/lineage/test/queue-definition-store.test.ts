import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { QueueDefinition } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecutionStore } from "../src/execution-store.js";
import { type LineageDatabase, openLineageDatabase } from "../src/index.js";
import type { DatabaseQueueDefinitionStore } from "../src/queue-definition-store.js";

// The queue definition table on embedded PGlite: the same migration and statements as PostgreSQL.

describe("queue definitions on PGlite", () => {
  const dir = mkdtempSync(join(tmpdir(), "factflow-qdefs-"));
  let db: LineageDatabase;
  let store: DatabaseQueueDefinitionStore;

  beforeAll(async () => {
    db = await openLineageDatabase({ dataDir: dir });
    store = (db.executions as ExecutionStore).queueDefinitions({ pollIntervalMs: 100 });
    await store.start();
  }, 120_000);
  afterAll(async () => {
    await store?.close();
    await db?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("stores, merges, notifies and refuses like the file store", async () => {
    const seen: [string, QueueDefinition][] = [];
    const off = store.onChange(async (name, definition) => {
      if (definition.concurrency === 13) throw new Error("refused");
      seen.push([name, definition]);
    });
    try {
      expect(await store.all()).toEqual(new Map());
      const first = await store.define("q.in", {
        concurrency: 0,
        retry: { max_attempts: 5 },
      } as QueueDefinition);
      expect(first).toEqual({
        queue: "q.in",
        changed: true,
        definition: {
          concurrency: 0,
          retry: { max_attempts: 5, initial_delay_ms: 1000, multiplier: 2, max_delay_ms: 60_000 },
        },
      });
      const second = await store.define("q.in", { retry: { multiplier: 3 } } as QueueDefinition);
      expect(second.definition.retry).toEqual({
        max_attempts: 5,
        initial_delay_ms: 1000,
        multiplier: 3,
        max_delay_ms: 60_000,
      });
      expect((await store.define("q.in", { concurrency: 0 })).changed).toBe(false);
      await expect(store.define("q.in", { concurrency: 13 })).rejects.toThrow("refused");
      expect((await store.get("q.in"))?.concurrency).toBe(0);
      expect(seen.map(([, d]) => d.retry?.multiplier)).toEqual([2, 3]);
      // Its own changes are not told twice by the poll.
      await store.poll();
      expect(seen).toHaveLength(2);
      expect(await store.get("other")).toBeUndefined();
    } finally {
      off();
    }
  });
});
