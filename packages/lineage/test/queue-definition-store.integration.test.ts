import type { QueueDefinition } from "@factflow/protocols";
import type { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecutionStore } from "../src/execution-store.js";
import { type LineageDatabase, openLineageDatabase } from "../src/index.js";
import type { DatabaseQueueDefinitionStore } from "../src/queue-definition-store.js";
import { createTestDatabase, openAdminClient, skipWithoutPostgres } from "./pg-test-database.js";

// Named queue definitions shared by several servers on one PostgreSQL (docs/deployment.md): two
// stores on two connections pools of the same database stand for two servers.

const skip = await skipWithoutPostgres();

/** A listener that records what it was told, like the running executions of one server. */
function recorder() {
  const seen: [string, QueueDefinition][] = [];
  return {
    seen,
    listener: async (name: string, definition: QueueDefinition) => {
      seen.push([name, definition]);
    },
    last: (name: string) => seen.filter(([n]) => n === name).at(-1)?.[1],
  };
}

describe.skipIf(skip)("queue definitions on PostgreSQL, shared by two servers", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let serverA: LineageDatabase;
  let serverB: LineageDatabase;
  let a: DatabaseQueueDefinitionStore;
  let b: DatabaseQueueDefinitionStore;
  let admin: Client;
  let dbName: string;

  beforeAll(async () => {
    database = await createTestDatabase("factflow_qdefs");
    dbName = new URL(database.url).pathname.slice(1);
    serverA = await openLineageDatabase({ databaseUrl: database.url });
    serverB = await openLineageDatabase({ databaseUrl: database.url });
    a = (serverA.executions as ExecutionStore).queueDefinitions({ pollIntervalMs: 200 });
    b = (serverB.executions as ExecutionStore).queueDefinitions({ pollIntervalMs: 200 });
    await Promise.all([a.start(), b.start()]);
    admin = await openAdminClient(database.url);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await admin?.end().catch(() => {});
    await serverA?.close();
    await serverB?.close();
    await database?.drop();
  });

  it("a define on one server reaches the other's listener and reads", async () => {
    const onA = recorder();
    const onB = recorder();
    const offA = a.onChange(onA.listener);
    const offB = b.onChange(onB.listener);
    try {
      const result = await a.define("work.in", { concurrency: 0, timeout_ms: 60_000 });
      expect(result).toEqual({
        queue: "work.in",
        changed: true,
        definition: { concurrency: 0, timeout_ms: 60_000 },
      });
      // The defining server's listener ran before the answer, exactly once.
      expect(onA.seen).toEqual([["work.in", { concurrency: 0, timeout_ms: 60_000 }]]);
      expect(await b.get("work.in")).toEqual({ concurrency: 0, timeout_ms: 60_000 });
      expect(await b.all()).toEqual(new Map([["work.in", { concurrency: 0, timeout_ms: 60_000 }]]));
      await expect.poll(() => onB.last("work.in")).toEqual({ concurrency: 0, timeout_ms: 60_000 });

      // And back: B merges into what A stored.
      const back = await b.define("work.in", { concurrency: 3 });
      expect(back.definition).toEqual({ concurrency: 3, timeout_ms: 60_000 });
      await expect.poll(() => onA.last("work.in")).toEqual({ concurrency: 3, timeout_ms: 60_000 });
      expect(await a.get("work.in")).toEqual({ concurrency: 3, timeout_ms: 60_000 });

      // A repeated define changes nothing and tells nobody.
      const before = [onA.seen.length, onB.seen.length];
      expect((await a.define("work.in", { concurrency: 3 })).changed).toBe(false);
      await a.poll();
      await b.poll();
      expect([onA.seen.length, onB.seen.length]).toEqual(before);
    } finally {
      offA();
      offB();
    }
  });

  it("never stores a definition a listener refuses", async () => {
    await a.define("refused.in", { concurrency: 2 });
    const onB = recorder();
    const offB = b.onChange(onB.listener);
    // Like RabbitMQ refusing to change a queue's x-max-priority: the consumers cannot take it.
    const offA = a.onChange(async (name, definition) => {
      if (name === "refused.in" && definition.dead_letter === false) throw new Error("broker refused");
    });
    try {
      await expect(a.define("refused.in", { dead_letter: false })).rejects.toThrow("broker refused");
      expect(await a.get("refused.in")).toEqual({ concurrency: 2 });
      expect(await b.get("refused.in")).toEqual({ concurrency: 2 });
      await b.poll();
      // B may still hear of the first define, never of the refused one.
      expect(onB.seen.some(([n, d]) => n === "refused.in" && d.dead_letter === false)).toBe(false);
    } finally {
      offA();
      offB();
    }
  });

  it("merges concurrent defines of one queue made on both servers", async () => {
    const onA = recorder();
    const onB = recorder();
    const offs = [a.onChange(onA.listener), b.onChange(onB.listener)];
    try {
      await Promise.all([
        a.define("both.in", { concurrency: 4 }),
        b.define("both.in", { timeout_ms: 5000 }),
        a.define("both.in", { dead_letter: false }),
        b.define("both.in", { prefetch: 20 }),
      ]);
      const expected = { concurrency: 4, timeout_ms: 5000, dead_letter: false, prefetch: 20 };
      expect(await a.get("both.in")).toEqual(expected);
      expect(await b.get("both.in")).toEqual(expected);
      // Whatever each server's listeners heard during the race, a poll brings them to the stored row.
      await a.poll();
      await b.poll();
      expect(onA.last("both.in")).toEqual(expected);
      expect(onB.last("both.in")).toEqual(expected);
    } finally {
      for (const off of offs) off();
    }
  });

  it("imports only names the table does not have", async () => {
    const imported = await b.importMissing(
      new Map<string, QueueDefinition>([
        ["work.in", { concurrency: 9 }],
        ["fresh.in", { prefetch: 5 }],
      ]),
    );
    expect(imported).toEqual(["fresh.in"]);
    expect(await a.get("work.in")).toEqual({ concurrency: 3, timeout_ms: 60_000 });
    expect(await a.get("fresh.in")).toEqual({ prefetch: 5 });
  });

  it("keeps converging after the database connections were cut", async () => {
    const onB = recorder();
    const offB = b.onChange(onB.listener);
    try {
      const killed = await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
          where datname = $1 and pid <> pg_backend_pid()`,
        [dbName],
      );
      expect(killed.rows.length).toBeGreaterThan(0);
      // The first statement on a dead pooled connection may fail; the pool then reconnects.
      await expect
        .poll(async () => {
          try {
            return (await a.define("after.cut", { concurrency: 7 })).definition;
          } catch {
            return undefined;
          }
        })
        .toEqual({ concurrency: 7 });
      await expect.poll(() => onB.last("after.cut")).toEqual({ concurrency: 7 });
      expect(await b.get("after.cut")).toEqual({ concurrency: 7 });
    } finally {
      offB();
    }
  });

  it("rejects a row that is not a valid definition with a clear error", async () => {
    await admin.query(
      `insert into factflow_queue_definitions (name, definition, revision) values ('bad.in', '{"colour":"red"}', 1)`,
    );
    try {
      await expect(a.get("bad.in")).rejects.toThrow(
        /factflow_queue_definitions.*not a valid queue definition/,
      );
    } finally {
      await admin.query(`delete from factflow_queue_definitions where name = 'bad.in'`);
    }
  });
});
