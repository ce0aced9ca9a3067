import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LineageRow, silentLogger } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  connectPglite,
  createPostgresSqlRunner,
  type DatabaseHandles,
  type LineageSqlRunner,
  LineageWriter,
  openLineageDatabase,
  uuidv7,
} from "../src/index.js";
import { fromStoredRow, type StoredLineageRow } from "../src/lineage-rows.js";
import { row } from "./lineage-suite.js";

/** A runner whose statements can be held until `open()`; counts the statements it was given. */
interface GatedRunner extends LineageSqlRunner {
  hold(): void;
  open(): void;
  /** Resolves once a statement is waiting at the closed gate. */
  reached(): Promise<void>;
  calls: number;
}

function gated(inner: LineageSqlRunner): GatedRunner {
  let gate: Promise<void> | undefined;
  let release: (() => void) | undefined;
  let onReach: (() => void) | undefined;
  let reachedOnce: Promise<void> = new Promise((resolve) => {
    onReach = resolve;
  });
  const pass = async () => {
    runner.calls++;
    if (gate !== undefined) {
      onReach?.();
      await gate;
    }
  };
  const runner: GatedRunner = {
    calls: 0,
    async execute(text, params) {
      await pass();
      await inner.execute(text, params);
    },
    async copy(text, data) {
      await pass();
      await (inner.copy as NonNullable<LineageSqlRunner["copy"]>)(text, data);
    },
    reset: () => inner.reset(),
    close: () => inner.close(),
    hold() {
      gate = new Promise((resolve) => {
        release = resolve;
      });
      reachedOnce = new Promise((resolve) => {
        onReach = resolve;
      });
    },
    open() {
      gate = undefined;
      release?.();
    },
    reached: () => reachedOnce,
  };
  return runner;
}

/** Bulk and pending lanes over one PGlite instance, each behind its own gate. */
function lanes(inner: LineageSqlRunner): {
  bulk: GatedRunner & { pendingLane(): GatedRunner };
  lane: GatedRunner;
} {
  const lane = gated(inner);
  const bulk = Object.assign(gated(inner), { pendingLane: () => lane });
  return { bulk, lane };
}

describe("lineage writer pending lane (PGlite)", () => {
  let dir = "";
  let handles: DatabaseHandles;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "factflow-pending-lane-"));
    await (await openLineageDatabase({ dataDir: dir })).close();
    handles = await connectPglite(dir);
  });
  afterAll(async () => {
    await handles?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function stored(id: string): Promise<LineageRow | undefined> {
    const found = await handles.db.selectFrom("lineage").selectAll().where("id", "=", id).executeTakeFirst();
    return found === undefined ? undefined : fromStoredRow(found as unknown as StoredLineageRow);
  }

  it("commits registered rows without waiting for the bulk batch ahead of them, durable on return", async () => {
    const { bulk } = lanes(handles.writer);
    const writer = new LineageWriter(bulk, silentLogger);
    const exec = uuidv7();
    const bulkRows = Array.from({ length: 50 }, () => row(exec));
    bulk.hold();
    for (const r of bulkRows) writer.record(r);
    const bulkFlushed = writer.flush();
    await bulk.reached(); // the bulk batch is in flight and stuck
    const children = [row(exec, { kind: "message" }), row(exec, { kind: "message" })];
    await writer.registerPending(children);
    for (const c of children) expect(await stored(c.id)).toEqual(c);
    expect(await stored(bulkRows[0]?.id as string)).toBeUndefined();
    bulk.open();
    await bulkFlushed;
    for (const r of bulkRows) expect(await stored(r.id)).toEqual(r);
    expect(writer.counters()).toMatchObject({ written: 52, lost: 0, queued: 0 });
  });

  it("roomFor answers at once below its limit, and above it resolves when the batch in flight commits, not after a full flush", async () => {
    const { bulk } = lanes(handles.writer);
    const writer = new LineageWriter(bulk, silentLogger, { batchSize: 10 });
    const exec = uuidv7();
    expect(writer.roomFor(5)).toBeUndefined();
    bulk.hold();
    const first = Array.from({ length: 10 }, () => row(exec));
    for (const r of first) writer.record(r);
    await bulk.reached(); // the first batch (10 rows) is in flight and stuck
    const later = Array.from({ length: 4 }, () => row(exec));
    for (const r of later) writer.record(r);
    expect(writer.counters().queued).toBe(14);
    let roomy = false;
    const room = writer.roomFor(5)?.then(() => {
      roomy = true;
    });
    expect(room).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(roomy).toBe(false);
    bulk.open();
    await room;
    // Room came back as the first batch committed, the later rows still queued: no full flush.
    expect(writer.counters().queued).toBe(4);
    expect(await stored(first[0]?.id as string)).toEqual(first[0]);
    await writer.flush();
    for (const r of later) expect(await stored(r.id)).toEqual(r);
    expect(writer.counters()).toMatchObject({ written: 14, lost: 0, queued: 0 });
  });

  it("holds an update of a row whose pending-lane commit is in flight until that commit ends", async () => {
    const { bulk, lane } = lanes(handles.writer);
    const writer = new LineageWriter(bulk, silentLogger);
    const child = row(uuidv7(), { kind: "message" });
    lane.hold();
    const registered = writer.registerPending([child]);
    await lane.reached();
    // Sent now, this UPDATE would match no row and the insert would then leave the row pending.
    const finishedAt = new Date().toISOString();
    writer.update(child.id, { status: "processing", attempt: 1 });
    writer.update(child.id, { status: "completed", finishedAt });
    expect(writer.counters().queued).toBe(3);
    const flushed = writer.flush();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(bulk.calls).toBe(0);
    lane.open();
    await registered;
    await flushed;
    expect(await stored(child.id)).toEqual({ ...child, status: "completed", finishedAt });
    expect(writer.counters()).toMatchObject({ written: 2, lost: 0, queued: 0 });
  });

  it("folds a change made before the lane took the row into the row, and flush covers the lane", async () => {
    const { bulk, lane } = lanes(handles.writer);
    const writer = new LineageWriter(bulk, silentLogger);
    const child = row(uuidv7(), { kind: "message" });
    const registered = writer.registerPending([child]);
    writer.update(child.id, { status: "failed", attempt: 1 });
    await writer.flush();
    expect(await stored(child.id)).toEqual({ ...child, status: "failed" });
    await registered;
    expect(lane.calls).toBe(1);
    expect(bulk.calls).toBe(0);
  });

  it("never lets a late insert of a row take back a newer status (the upsert's guard)", async () => {
    const writer = new LineageWriter(handles.writer, silentLogger);
    const r = row(uuidv7());
    await writer.registerPending([r]);
    writer.update(r.id, { status: "completed" });
    await writer.flush();
    writer.record(r); // the same pending row again, e.g. a timed-out attempt committing late
    await writer.flush();
    expect((await stored(r.id))?.status).toBe("completed");
    // A retry restarts at a higher attempt: an older attempt's row must not overwrite it either.
    writer.update(r.id, { status: "pending", attempt: 2 });
    await writer.flush();
    writer.record({ ...r, status: "processing" });
    await writer.flush();
    expect(await stored(r.id)).toMatchObject({ status: "pending", attempt: 2 });
    // A row at least as far along still replaces the stored one.
    writer.record({ ...r, status: "failed", attempt: 2 });
    await writer.flush();
    expect(await stored(r.id)).toMatchObject({ status: "failed", attempt: 2 });
  });

  it("retries a failed pending-lane commit and resolves once it is committed", async () => {
    const { bulk, lane } = lanes(handles.writer);
    let failures = 1;
    const flaky: LineageSqlRunner = {
      ...lane,
      copy: async (text, data) => {
        if (failures-- > 0) throw Object.assign(new Error("connection reset"), { code: "ECONNRESET" });
        await (lane.copy as NonNullable<LineageSqlRunner["copy"]>)(text, data);
      },
    };
    const writer = new LineageWriter({ ...bulk, pendingLane: () => flaky }, silentLogger, {
      retryDelayMs: 1,
    });
    const children = [row(uuidv7()), row(uuidv7())];
    await writer.registerPending(children);
    for (const c of children) expect(await stored(c.id)).toEqual(c);
    expect(writer.counters()).toMatchObject({ written: 2, retriedWrites: 2, lost: 0, queued: 0 });
  });

  it("on a shared connection queues a second bulk batch behind the first, but not while the pending lane is in use", async () => {
    // No pendingLane: the lane shares the bulk runner, as on PGlite.
    const shared = gated(handles.writer);
    // The lane counts as in use for a minute after a registration: no race with a slow machine.
    // Open rows go to the queue at once (no hold): the test counts the batches they make.
    const writer = new LineageWriter(shared, silentLogger, {
      batchSize: 10,
      laneQuietMs: 60_000,
      holdOpenMs: 0,
    });
    const exec = uuidv7();
    const batchOf = (n: number) => Array.from({ length: n }, () => row(exec));
    const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

    // The lane is quiet: while the first batch is held in the database, the next one is handed over.
    shared.hold();
    const quiet = [...batchOf(10), ...batchOf(3)];
    for (const r of quiet.slice(0, 10)) writer.record(r);
    await shared.reached();
    const before = shared.calls;
    for (const r of quiet.slice(10)) writer.record(r);
    await settle();
    expect(shared.calls).toBe(before + 1);
    shared.open();
    await writer.flush();

    // Right after a registration the lane counts as in use: one bulk batch at a time, so the next
    // pending-lane commit waits behind one bulk batch at most.
    await writer.registerPending(batchOf(1));
    shared.hold();
    const busy = [...batchOf(10), ...batchOf(3)];
    for (const r of busy.slice(0, 10)) writer.record(r);
    await shared.reached();
    const held = shared.calls;
    for (const r of busy.slice(10)) writer.record(r);
    await settle();
    expect(shared.calls).toBe(held);
    shared.open();
    await writer.flush();
    for (const r of [...quiet, ...busy]) expect(await stored(r.id)).toEqual(r);
    expect(writer.counters()).toMatchObject({ written: 27, lost: 0, queued: 0 });
  });
});

describe("lineage writer pending lane failures", () => {
  it("counts rows lost after the last attempt and resolves (the caller publishes; lineage never fails a pipeline)", async () => {
    // A real node-postgres pool aimed at a port nobody listens on: every commit fails fast.
    const runner = createPostgresSqlRunner("postgres://postgres@127.0.0.1:1/none", {
      connectTimeoutSeconds: 1,
    });
    const writer = new LineageWriter(runner, silentLogger, { attempts: 2, retryDelayMs: 1 });
    const r = row(uuidv7());
    const registered = writer.registerPending([r, row(uuidv7())]);
    writer.update(r.id, { status: "completed" });
    await registered;
    await writer.flush();
    expect(writer.counters()).toMatchObject({ written: 0, retriedWrites: 2, lost: 2, queued: 0 });
    await writer.close();
    await expect(writer.registerPending([row(uuidv7())])).rejects.toThrow(/closed/);
    await runner.close();
  });
});
