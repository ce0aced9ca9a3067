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
