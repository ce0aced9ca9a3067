import { describe, expect, it } from "vitest";
import { openLineageDatabase, uuidv7 } from "../src/index.js";
import { lineageSuite, row } from "./lineage-suite.js";

lineageSuite("memory", { open: () => openLineageDatabase({ memory: true }) });

describe("in-memory lineage", () => {
  it("keeps completion semantics: open rows counted exactly, a late pending never reopens a row", async () => {
    const db = await openLineageDatabase({ memory: true });
    const exec = uuidv7();
    const child = row(exec, { kind: "message" });
    await db.lineage.registerPending([child]);
    expect(await db.lineage.countOpen(exec)).toBe(1);
    db.lineage.update(child.id, { status: "completed" });
    expect(await db.lineage.countOpen(exec)).toBe(0);
    // A pending copy of a row that already completed (a retried insert) is ignored, like the upsert.
    db.lineage.record({ ...child, status: "pending" });
    expect(await db.lineage.countOpen(exec)).toBe(0);
    // A retry's pending at attempt 2 does reopen it.
    db.lineage.record({ ...child, status: "pending", attempt: 2 });
    expect(await db.lineage.countOpen(exec)).toBe(1);
    // An update of an unknown row changes nothing.
    db.lineage.update(uuidv7(), { status: "completed" });
    expect(db.lineage.counters()).toMatchObject({ lost: 0, queued: 0 });
    await db.close();
    expect(() => db.lineage.record(row(exec))).toThrow(/closed/);
  });

  it("reads an execution without its input when asked to", async () => {
    const db = await openLineageDatabase({ memory: true });
    const input = { items: [1, 2, 3] };
    const created = await db.executions.createExecution({
      id: uuidv7(),
      configName: "inputs",
      configVersion: null,
      configSnapshot: { name: "inputs", init: { route: "a", message: {} }, routes: {} } as never,
      input,
    });
    expect((await db.executions.getExecution(created.id))?.input).toEqual(input);
    const statusOnly = await db.executions.getExecution(created.id, { includeInput: false });
    expect(statusOnly).toEqual({ ...created, input: null });
    // The stored execution keeps its input.
    expect((await db.executions.getExecution(created.id))?.input).toEqual(input);
    await db.close();
  });

  it("persists nothing: a second open starts empty", async () => {
    const first = await openLineageDatabase({ memory: true });
    const exec = uuidv7();
    first.lineage.record(row(exec));
    await first.close();
    const second = await openLineageDatabase({ memory: true });
    expect(second.dialect).toBe("memory");
    expect(await second.lineage.countOpen(exec)).toBe(0);
    expect((await second.executions.listExecutions()).total).toBe(0);
    await second.close();
  });
});
