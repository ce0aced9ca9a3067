import { type LineageRow, silentLogger } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DatabaseHandles,
  type LineageSqlRunner,
  LineageStore,
  LineageWriter,
  uuidv7,
} from "../src/index.js";
import { fromStoredRow, type StoredLineageRow } from "../src/lineage-rows.js";
import { row } from "./lineage-suite.js";
import { type MigratedTarget, migratedDialects } from "./migrated-targets.js";

const dialects = await migratedDialects("factflow-open-hold");

/** Long enough that no row leaves the hold by itself while a test looks. */
const FOREVER = 600_000;

describe.each(dialects)("open rows held back by the writer on $dialect", ({ open }) => {
  let target: MigratedTarget | undefined;
  let handles: DatabaseHandles;
  const calls = { copy: 0, execute: 0 };
  let runner: LineageSqlRunner;

  beforeAll(async () => {
    target = await open();
    handles = target.handles;
    const inner = handles.writer;
    runner = {
      execute: (text, params) => {
        calls.execute++;
        return inner.execute(text, params);
      },
      copy: (text, data) => {
        calls.copy++;
        return (inner.copy as NonNullable<LineageSqlRunner["copy"]>)(text, data);
      },
      reset: () => inner.reset(),
      close: () => inner.close(),
    };
  });
  afterAll(async () => {
    await target?.cleanup();
  });

  async function stored(id: string): Promise<LineageRow | undefined> {
    const found = await handles.db.selectFrom("lineage").selectAll().where("id", "=", id).executeTakeFirst();
    return found === undefined ? undefined : fromStoredRow(found as unknown as StoredLineageRow);
  }

  it("writes a hop that settles within the hold once, already settled, and never updates it", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: FOREVER });
    const exec = uuidv7();
    const hop = row(exec, { kind: "message" });
    writer.record(hop);
    writer.update(hop.id, { status: "processing", attempt: 1 });
    expect(writer.heldOpen(exec)).toBe(1);
    // Only what is queued: the open row stays in memory, unwritten.
    await writer.flushQueued();
    expect(await stored(hop.id)).toBeUndefined();
    const before = { ...calls };
    const finishedAt = new Date().toISOString();
    writer.update(hop.id, { status: "completed", finishedAt, attempt: 1 });
    expect(writer.heldOpen(exec)).toBe(0);
    await writer.flushQueued();
    expect(await stored(hop.id)).toEqual({ ...hop, status: "completed", finishedAt });
    expect(calls.copy + calls.execute - before.copy - before.execute).toBe(1);
    expect(writer.counters()).toMatchObject({ written: 1, lost: 0, queued: 0 });
    await writer.close();
  });

  it("writes a hop still open when the hold runs out as pending, then updates it", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: 20 });
    const exec = uuidv7();
    const slow = row(exec);
    writer.record(slow);
    // Released by the hold's own timer, with no flush: a stuck hop becomes visible by itself.
    for (let i = 0; (await stored(slow.id)) === undefined; i++) {
      expect(i).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(await stored(slow.id)).toEqual(slow);
    expect(writer.heldOpen(exec)).toBe(0);
    const finishedAt = new Date().toISOString();
    writer.update(slow.id, {
      status: "failed",
      finishedAt,
      error: { class: "E", message: "m", retryable: false, fatal: false },
    });
    await writer.flush();
    expect(await stored(slow.id)).toMatchObject({ status: "failed", finishedAt });
    expect(writer.counters()).toMatchObject({ written: 2, lost: 0 });
    await writer.close();
  });

  it("writes held rows as they stand on flush and on close", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: FOREVER });
    const exec = uuidv7();
    const a = row(exec);
    const b = row(exec);
    writer.record(a);
    await writer.flush();
    expect(await stored(a.id)).toEqual(a);
    writer.record(b);
    await writer.close();
    expect(await stored(b.id)).toEqual(b);
  });

  it("keeps a retry's pending row held, and hands a held row over to registerPending", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: FOREVER });
    const exec = uuidv7();
    const retried = row(exec, { kind: "message" });
    writer.record(retried);
    writer.update(retried.id, { status: "pending", attempt: 2 });
    expect(writer.heldOpen(exec)).toBe(1);
    const registered = row(exec, { kind: "message" });
    writer.record(registered);
    await writer.registerPending([registered]);
    expect(writer.heldOpen(exec)).toBe(1);
    expect(await stored(registered.id)).toEqual(registered);
    writer.update(retried.id, { status: "completed", attempt: 2 });
    await writer.flushQueued();
    expect(await stored(retried.id)).toMatchObject({ status: "completed", attempt: 2 });
    await writer.close();
  });

  it("counts held rows as open in countOpen, without writing them", async () => {
    const store = new LineageStore(handles.db, runner, silentLogger, { holdOpenMs: FOREVER });
    const exec = uuidv7();
    const quick = row(exec);
    const stuck = row(exec, { kind: "message" });
    store.record(quick);
    store.record(stuck);
    expect(await store.countOpen(exec)).toBe(2);
    expect(await stored(quick.id)).toBeUndefined();
    store.update(quick.id, { status: "completed", finishedAt: new Date().toISOString() });
    expect(await store.countOpen(exec)).toBe(1);
    expect((await stored(quick.id))?.status).toBe("completed");
    store.update(stuck.id, { status: "abandoned", finishedAt: new Date().toISOString() });
    expect(await store.countOpen(exec)).toBe(0);
    await store.close();
  });
});

describe("message rows waiting in a queue", () => {
  it("holds a pending message row until it runs, then for the hold; a bound releases the oldest", async () => {
    const released: string[][] = [];
    const { OpenRowHold } = await import("../src/open-row-hold.js");
    const { toPendingRow } = await import("../src/lineage-sql.js");
    const hold = new OpenRowHold(FOREVER, (rows) => released.push(rows.map((r) => r.id)), 10);
    const exec = uuidv7();
    const waiting = Array.from({ length: 10 }, () => toPendingRow(row(exec, { kind: "message" })));
    for (const r of waiting) hold.add(r);
    expect(hold.size).toBe(10);
    expect(hold.openOf(exec)).toBe(10);
    // The eleventh waiting row goes past the bound: the oldest (a tenth of the bound) is written.
    const extra = toPendingRow(row(exec, { kind: "message" }));
    hold.add(extra);
    expect(released).toEqual([[waiting[0]?.id]]);
    expect(hold.size).toBe(10);
    // A waiting row that starts running moves to the timed group, still held.
    const runs = waiting[1] as (typeof waiting)[number];
    runs.status = "processing";
    hold.changed(runs);
    expect(hold.get(runs.id)?.status).toBe("processing");
    expect(hold.take(runs.id)?.id).toBe(runs.id);
    expect(hold.size).toBe(9);
    expect(hold.drain()).toHaveLength(9);
    expect(hold.size).toBe(0);
  });

  it("releases a running message row when the hold runs out, but not one still waiting", async () => {
    const released: string[] = [];
    const { OpenRowHold } = await import("../src/open-row-hold.js");
    const { toPendingRow } = await import("../src/lineage-sql.js");
    const hold = new OpenRowHold(20, (rows) => released.push(...rows.map((r) => r.id)));
    const exec = uuidv7();
    const waiting = toPendingRow(row(exec, { kind: "message" }));
    const running = toPendingRow(row(exec, { kind: "message", status: "processing" }));
    hold.add(waiting);
    hold.add(running);
    for (let i = 0; released.length === 0; i++) {
      expect(i).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(released).toEqual([running.id]);
    expect(hold.get(waiting.id)?.id).toBe(waiting.id);
    hold.drain();
  });
});
