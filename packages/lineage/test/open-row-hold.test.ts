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

  it("holds a message row whose message waits in a queue for holdWaitingMs, and a running hop's row for holdOpenMs from its start", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: 20, holdWaitingMs: FOREVER });
    const exec = uuidv7();
    const waiting = row(exec, { kind: "message" });
    const started = row(exec, { kind: "message" });
    const slowHop = row(exec);
    writer.record(waiting);
    writer.record(started);
    writer.record(slowHop);
    // The adapter row leaves by its own timer; the waiting message rows stay in memory meanwhile.
    for (let i = 0; (await stored(slowHop.id)) === undefined; i++) {
      expect(i).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await writer.flushQueued();
    expect(await stored(waiting.id)).toBeUndefined();
    expect(await stored(started.id)).toBeUndefined();
    expect(writer.heldOpen(exec)).toBe(2);
    // Its hop starts: from then on it is a running row, written open once holdOpenMs has passed.
    writer.update(started.id, { status: "processing", attempt: 1 });
    for (let i = 0; (await stored(started.id)) === undefined; i++) {
      expect(i).toBeLessThan(1000);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(await stored(started.id)).toMatchObject({ status: "processing" });
    await writer.flushQueued();
    expect(await stored(waiting.id)).toBeUndefined();
    // Settled while it waited: one insert, already settled.
    const before = { ...calls };
    writer.update(waiting.id, { status: "completed", attempt: 1 });
    await writer.flushQueued();
    expect(await stored(waiting.id)).toMatchObject({ status: "completed" });
    expect(calls.copy + calls.execute - before.copy - before.execute).toBe(1);
    await writer.close();
  });

  it("holds nothing, waiting message rows included, with holdOpenMs 0", async () => {
    const writer = new LineageWriter(runner, silentLogger, { holdOpenMs: 0, holdWaitingMs: FOREVER });
    const exec = uuidv7();
    const waiting = row(exec, { kind: "message" });
    writer.record(waiting);
    expect(writer.heldOpen(exec)).toBe(0);
    await writer.flushQueued();
    expect(await stored(waiting.id)).toEqual(waiting);
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
    // A settled adapter row waits (within the hold) for a write of its message row to travel in.
    expect(await stored(quick.id)).toBeUndefined();
    store.update(stuck.id, { status: "abandoned", finishedAt: new Date().toISOString() });
    expect(await store.countOpen(exec)).toBe(0);
    // Its message row was never recorded here: a flush writes it as a row of its own.
    await store.flush();
    expect((await stored(quick.id))?.status).toBe("completed");
    await store.close();
  });
});
