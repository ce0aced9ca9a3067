import {
  type LineageProtocol,
  type LineageRow,
  type LineageUpdate,
  OPEN_LINEAGE_STATUSES,
  silentLogger,
} from "@factflow/protocols";
import { sql } from "kysely";
import { Migrator } from "kysely/migration";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandles, LineageStore, MemoryLineageStore, uuidv7 } from "../src/index.js";
import { lineageMigrationProvider, MIGRATION_LOCK_TABLE, MIGRATION_TABLE } from "../src/migrations.js";
import { type MigratedTarget, migratedDialects } from "./migrated-targets.js";

const dialects = await migratedDialects("factflow-folded");

/** Long enough that no row leaves the hold by itself while a test looks. */
const FOREVER = 600_000;

const now = (offsetMs = 0) => new Date(Date.now() + offsetMs).toISOString();

/** The same calls on a database store and on the memory store, whose answers are the reference. */
class Twin {
  constructor(
    readonly store: LineageStore,
    readonly memory = new MemoryLineageStore(),
  ) {}

  record(row: LineageRow): void {
    this.store.record(row);
    this.memory.record(row);
  }

  update(id: string, change: LineageUpdate): void {
    this.store.update(id, change);
    this.memory.update(id, change);
  }

  async registerPending(rows: LineageRow[]): Promise<void> {
    await this.store.registerPending(rows);
    await this.memory.registerPending(rows);
  }

  /** Every read of the protocol answers the same on both. */
  async expectSameReads(executionId: string, messageIds: readonly string[], routes: readonly string[]) {
    const both = async <T>(read: (l: LineageProtocol) => Promise<T>) => {
      const [db, mem] = await Promise.all([read(this.store), read(this.memory)]);
      expect(db).toEqual(mem);
      return db;
    };
    await both((l) => l.countOpen(executionId));
    await both((l) => l.rows(executionId));
    await both((l) => l.rows(executionId, { kind: "adapter" }));
    await both((l) => l.rows(executionId, { kind: "message" }));
    for (const status of [...OPEN_LINEAGE_STATUSES, "completed", "failed"] as const)
      await both((l) => l.rows(executionId, { status }));
    await both((l) => l.rows(executionId, { offset: 1, limit: 2 }));
    await both((l) => l.countsByRoute(executionId));
    for (const route of routes) {
      await both((l) => l.rows(executionId, { route }));
      await both((l) => l.routeInputs(executionId, route));
    }
    for (const m of messageIds) {
      await both((l) => l.tree(executionId, m));
      await both((l) => l.tree(executionId, m, { limit: 3 }));
      await both(async (l) => (await l.messageStatus?.(executionId, m)) ?? null);
    }
  }
}

interface Hop {
  readonly message: LineageRow;
  readonly adapters: LineageRow[];
}

/** The rows of one hop as the engine writes them: a message row, then one adapter row per adapter. */
function hop(
  executionId: string,
  route: string,
  adapters: number,
  parent?: { row: LineageRow; messageId: string },
): Hop {
  const messageId = uuidv7();
  const message: LineageRow = {
    id: messageId,
    executionId,
    kind: "message",
    route,
    messageId,
    correlationId: "corr-1",
    attempt: 1,
    status: "pending",
    payload: { n: messageId.slice(-4) },
    startedAt: now(),
    ...(parent === undefined ? {} : { parentId: parent.row.id, parentMessageId: parent.messageId }),
  };
  const rows: LineageRow[] = [];
  for (let i = 0; i < adapters; i++) {
    rows.push({
      id: uuidv7(),
      executionId,
      kind: "adapter",
      route,
      adapter: `a${i}`,
      adapterIndex: i,
      messageId,
      correlationId: "corr-1",
      attempt: 1,
      status: "pending",
      inputHash: `h${i}`,
      startedAt: now(i + 1),
      ...(i === 0 ? {} : { parentId: (rows[i - 1] as LineageRow).id }),
    });
  }
  return { message, adapters: rows };
}

/** Runs a hop's adapters to completion, each with an output key. */
function runAdapters(twin: Twin, h: Hop): void {
  for (const a of h.adapters) {
    twin.record(a);
    twin.update(a.id, { status: "completed", outputKeys: [`k-${a.id.slice(-4)}`], finishedAt: now(5) });
  }
}

describe.each(dialects)("adapter rows folded into their message row on $dialect", ({ open }) => {
  let target: MigratedTarget | undefined;
  let handles: DatabaseHandles;

  beforeAll(async () => {
    target = await open();
    handles = target.handles;
  });
  afterAll(async () => {
    await target?.cleanup();
  });

  const storeOf = () =>
    new LineageStore(handles.lineageDb, handles.writer, silentLogger, { holdOpenMs: FOREVER });

  async function tableRows(executionId: string) {
    const result = await sql<{ id: string; kind: string; invocations: unknown[] | null }>`
      select id, kind, invocations from lineage where execution_id = ${executionId} order by started_at, id`.execute(
      handles.lineageDb,
    );
    return result.rows;
  }

  it("writes a fast hop as one row carrying its adapter rows, and reads them back as rows", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const root = hop(exec, "parse", 2);
    twin.record(root.message);
    runAdapters(twin, root);
    const child = hop(exec, "enrich", 1, { row: root.adapters[1] as LineageRow, messageId: root.message.id });
    twin.record(child.message);
    twin.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    runAdapters(twin, child);
    twin.update(child.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();

    const stored = await tableRows(exec);
    expect(stored.map((r) => [r.kind, r.invocations?.length ?? 0])).toEqual([
      ["message", 2],
      ["message", 1],
    ]);
    expect((await twin.store.rows(exec)).total).toBe(5);
    await twin.expectSameReads(exec, [root.message.id, child.message.id], ["parse", "enrich"]);
    await twin.store.close();
  });

  it("folds into the queued UPDATE of a message row written open before (registered, or a backlog)", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const root = hop(exec, "parse", 2);
    await twin.registerPending([root.message]);
    expect((await tableRows(exec)).map((r) => r.invocations)).toEqual([null]);
    runAdapters(twin, root);
    const children = [0, 1].map(() =>
      hop(exec, "enrich", 1, { row: root.adapters[1] as LineageRow, messageId: root.message.id }),
    );
    await twin.registerPending(children.map((c) => c.message));
    twin.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    for (const c of children) {
      runAdapters(twin, c);
      twin.update(c.message.id, { status: "failed", finishedAt: now(9), attempt: 1, error: errorInfo });
    }
    await twin.store.flushSettled();

    // The children's parent row, and its own parent, went with them in their registration's
    // commit (a stored row's parent is stored); the children's own adapter rows travelled in their
    // message rows' UPDATE.
    const stored = await tableRows(exec);
    expect(stored.map((r) => `${r.kind} ${r.invocations?.length ?? 0}`).sort()).toEqual([
      "adapter 0",
      "adapter 0",
      "message 0",
      "message 1",
      "message 1",
    ]);
    await twin.expectSameReads(
      exec,
      [root.message.id, ...children.map((c) => c.message.id)],
      ["parse", "enrich"],
    );
    await twin.store.close();
  });

  it("keeps a parent of held rows out of an UPDATE, which commits apart from their inserts", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const root = hop(exec, "parse", 2);
    await twin.registerPending([root.message]);
    runAdapters(twin, root);
    const parent = root.adapters[1] as LineageRow;
    const child = hop(exec, "enrich", 1, { row: parent, messageId: root.message.id });
    twin.record(child.message);
    twin.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    const stored = await tableRows(exec);
    expect(
      stored.map((r) => `${r.id === parent.id ? "parent" : r.kind} ${r.invocations?.length ?? 0}`).sort(),
    ).toEqual(["message 1", "parent 0"]);
    runAdapters(twin, child);
    twin.update(child.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    await twin.expectSameReads(exec, [root.message.id, child.message.id], ["parse", "enrich"]);
    await twin.store.close();
  });

  it("stores a parked parent row before a child message row that settles first", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const root = hop(exec, "parse", 1);
    twin.record(root.message);
    runAdapters(twin, root);
    const child = hop(exec, "enrich", 1, { row: root.adapters[0] as LineageRow, messageId: root.message.id });
    twin.record(child.message);
    // The child's delivery ends (and commits) while the root's publisher still waits for its confirm.
    runAdapters(twin, child);
    twin.update(child.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    const stored = await tableRows(exec);
    expect(stored.map((r) => r.id).sort()).toEqual(
      [(root.adapters[0] as LineageRow).id, child.message.id].sort(),
    );
    twin.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    await twin.expectSameReads(exec, [root.message.id, child.message.id], ["parse", "enrich"]);
    await twin.store.close();
  });

  it("keeps a slow adapter row visible open, in a row of its own, and updates it when it settles", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const h = hop(exec, "parse", 2);
    twin.record(h.message);
    const [fast, slow] = h.adapters as [LineageRow, LineageRow];
    twin.record(fast);
    twin.update(fast.id, { status: "completed", finishedAt: now(2) });
    twin.record(slow);
    // The hold runs out (a flush writes held rows as they stand): the open rows are readable.
    await twin.store.flush();
    expect((await twin.store.rows(exec, { status: "pending" })).items.map((r) => r.id).sort()).toEqual(
      [h.message.id, slow.id].sort(),
    );
    await twin.expectSameReads(exec, [h.message.id], ["parse"]);
    twin.update(slow.id, { status: "completed", finishedAt: now(7) });
    twin.update(h.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    await twin.expectSameReads(exec, [h.message.id], ["parse"]);
    expect(await twin.store.countOpen(exec)).toBe(0);
    await twin.store.close();
  });

  it("writes the adapter rows of a delivery that leaves its message open (a retry) before it settles", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const h = hop(exec, "parse", 1);
    twin.record(h.message);
    const a = h.adapters[0] as LineageRow;
    twin.record(a);
    twin.update(a.id, { status: "failed", error: errorInfo, finishedAt: now(2) });
    twin.update(h.message.id, { status: "pending", attempt: 2, error: errorInfo });
    // The delivery's commit: the failed invocation is durable though its message row is held.
    await twin.store.flushSettled();
    expect((await tableRows(exec)).map((r) => r.id)).toEqual([a.id]);
    const retry = hop(exec, "parse", 1);
    const again = { ...(retry.adapters[0] as LineageRow), messageId: h.message.id, attempt: 2 };
    twin.record(again);
    twin.update(again.id, { status: "completed", finishedAt: now(8) });
    twin.update(h.message.id, { status: "completed", finishedAt: now(9), attempt: 2 });
    await twin.store.flushSettled();
    const stored = await tableRows(exec);
    expect(stored.map((r) => `${r.kind} ${r.invocations?.length ?? 0}`).sort()).toEqual([
      "adapter 0",
      "message 1",
    ]);
    await twin.expectSameReads(exec, [h.message.id], ["parse"]);
    await twin.store.close();
  });

  it("walks up through a folded parent without parentMessageId, and survives a batch sent twice", async () => {
    const twin = new Twin(storeOf());
    const exec = uuidv7();
    const root = hop(exec, "parse", 1);
    twin.record(root.message);
    runAdapters(twin, root);
    twin.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await twin.store.flushSettled();
    const { parentMessageId: _, ...orphan } = hop(exec, "enrich", 0, {
      row: root.adapters[0] as LineageRow,
      messageId: root.message.id,
    }).message;
    twin.record({ ...orphan, status: "completed", finishedAt: now(9) });
    await twin.store.flushSettled();
    await twin.expectSameReads(exec, [root.message.id, orphan.id], ["parse", "enrich"]);
    // The same message row with the same folded row again (a retried batch whose first try
    // committed): the upsert keeps one copy.
    const store2 = new Twin(storeOf(), twin.memory);
    store2.record({ ...root.message, status: "completed", finishedAt: now(9) });
    const a = root.adapters[0] as LineageRow;
    store2.record({ ...a, status: "completed", outputKeys: [`k-${a.id.slice(-4)}`], finishedAt: now(5) });
    store2.update(root.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
    await store2.store.close();
    expect((await tableRows(exec)).map((r) => r.invocations?.length ?? 0)).toEqual([1, 0]);
    await twin.expectSameReads(exec, [root.message.id, orphan.id], ["parse", "enrich"]);
    await twin.store.close();
  });
});

const errorInfo = { class: "AdapterError", message: "boom", retryable: true, fatal: false };

describe.each(dialects)("a database written before migration 0006 on $dialect", ({ open }) => {
  it("reads its rows unchanged after the migration, and new hops beside them", async () => {
    const target = await open();
    const { lineageDb } = target.handles;
    try {
      // Back to the schema of 0005, as a database of an older release has it.
      const migrator = new Migrator({
        db: lineageDb,
        provider: lineageMigrationProvider,
        migrationTableName: MIGRATION_TABLE,
        migrationLockTableName: MIGRATION_LOCK_TABLE,
      });
      const down = await migrator.migrateTo("0005_lineage_sanitised");
      expect(down.error).toBeUndefined();
      const memory = new MemoryLineageStore();
      const exec = uuidv7();
      const root = hop(exec, "parse", 2);
      const child = hop(exec, "enrich", 1, {
        row: root.adapters[1] as LineageRow,
        messageId: root.message.id,
      });
      const settled = (r: LineageRow): LineageRow => ({ ...r, status: "completed", finishedAt: now(9) });
      // The old layout: a row per adapter invocation, and no parent message id.
      const { parentMessageId: _, ...childMessage } = child.message;
      const old = [root.message, ...root.adapters, childMessage, ...child.adapters].map(settled);
      for (const r of old) {
        memory.record(r);
        await sql`insert into lineage (id, execution_id, kind, route, adapter, adapter_index, message_id,
            correlation_id, parent_id, attempt, status, input_hash, payload, started_at, finished_at)
          values (${r.id}, ${r.executionId}, ${r.kind}, ${r.route}, ${r.adapter ?? null}, ${r.adapterIndex ?? null},
            ${r.messageId}, ${r.correlationId}, ${r.parentId ?? null}, ${r.attempt}, ${r.status},
            ${r.inputHash ?? null}, ${r.payload === undefined ? null : JSON.stringify(r.payload)},
            ${r.startedAt}, ${r.finishedAt ?? null})`.execute(lineageDb);
      }
      const up = await migrator.migrateToLatest();
      expect(up.error).toBeUndefined();
      const twin = new Twin(
        new LineageStore(lineageDb, target.handles.writer, silentLogger, { holdOpenMs: FOREVER }),
        memory,
      );
      // A new hop below the old ones, written in the new layout.
      const grandchild = hop(exec, "store", 1, {
        row: child.adapters[0] as LineageRow,
        messageId: child.message.id,
      });
      twin.record(grandchild.message);
      runAdapters(twin, grandchild);
      twin.update(grandchild.message.id, { status: "completed", finishedAt: now(9), attempt: 1 });
      await twin.store.flushSettled();
      await twin.expectSameReads(
        exec,
        [root.message.id, child.message.id, grandchild.message.id],
        ["parse", "enrich", "store"],
      );
      await twin.store.close();
    } finally {
      await target.cleanup();
    }
  });
});
