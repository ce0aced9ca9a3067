import { silentLogger } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createPostgresSqlRunner, type LineageSqlRunner, LineageWriter, uuidv7 } from "../src/index.js";
import { row } from "./lineage-suite.js";
import { skipWithoutPostgres, useMigratedDatabase } from "./pg-test-database.js";

const skip = await skipWithoutPostgres();

/**
 * A real PostgreSQL runner whose bulk statements can be held at a gate while they carry a chosen
 * row id; records the ids each bulk statement carried, in the order they were sent.
 */
function holding(inner: LineageSqlRunner) {
  let gate: Promise<void> | undefined;
  let open: (() => void) | undefined;
  let heldId: string | undefined;
  let onHeld: (() => void) | undefined;
  const held = new Promise<void>((resolve) => {
    onHeld = resolve;
  });
  const sent: string[] = [];
  const pass = async (payload: string) => {
    sent.push(payload);
    if (gate !== undefined && heldId !== undefined && payload.includes(heldId)) {
      onHeld?.();
      await gate;
    }
  };
  const runner: LineageSqlRunner = {
    async execute(text, params) {
      await pass(params.map(String).join(" "));
      await inner.execute(text, params);
    },
    reset: () => inner.reset(),
    close: () => inner.close(),
    pendingLane: () => (inner.pendingLane as NonNullable<LineageSqlRunner["pendingLane"]>)(),
  };
  return {
    runner,
    sent,
    held,
    hold(id: string) {
      heldId = id;
      gate = new Promise((resolve) => {
        open = resolve;
      });
    },
    release: () => open?.(),
  };
}

describe.skipIf(skip)("lineage writer bulk lane on PostgreSQL", () => {
  const db = useMigratedDatabase("factflow_bulk");

  const statusOf = async (id: string) =>
    (await db.admin.query<{ status: string }>("select status from lineage where id = $1", [id])).rows[0]
      ?.status;

  it("commits a second batch while the first is in flight, never a row's update before its insert", async () => {
    const gate = holding(createPostgresSqlRunner(db.url));
    const writer = new LineageWriter(gate.runner, silentLogger, { intervalMs: 1 });
    const exec = uuidv7();
    try {
      const first = row(exec);
      gate.hold(first.id);
      writer.record(first);
      await gate.held;
      // The first batch is held inside its INSERT. Its row is updated, and new rows come in.
      writer.update(first.id, { status: "completed", finishedAt: new Date().toISOString() });
      const later = Array.from({ length: 5 }, () => row(exec, { status: "completed" }));
      for (const r of later) writer.record(r);
      const flushed = writer.flush();
      let flushDone = false;
      void flushed.then(() => {
        flushDone = true;
      });
      // A second batch carries the new rows and commits while the first is still held...
      await expect.poll(() => statusOf(later[4]?.id ?? ""), { timeout: 10_000 }).toBe("completed");
      // ...but not the update of the held row, and the flush waits for the first batch.
      expect(gate.sent.filter((s) => s.includes(first.id))).toHaveLength(1);
      expect(await statusOf(first.id)).toBeUndefined();
      expect(flushDone).toBe(false);
      gate.release();
      await flushed;
      expect(await statusOf(first.id)).toBe("completed");
      // The update went out after the insert, in a batch of its own.
      expect(gate.sent.filter((s) => s.includes(first.id))).toHaveLength(2);
      expect(writer.counters()).toMatchObject({ written: 7, lost: 0, queued: 0 });
    } finally {
      gate.release();
      await writer.close();
      await gate.runner.close();
    }
  });

  it("keeps every write of a busy stream, in order per row, with two batches in flight", async () => {
    const inner = createPostgresSqlRunner(db.url);
    // Inserts start after a pause, so an update sent too early would overtake its row's insert.
    const runner: LineageSqlRunner = {
      async execute(text, params) {
        if (text.startsWith("insert")) await new Promise((resolve) => setTimeout(resolve, 4));
        await inner.execute(text, params);
      },
      reset: () => inner.reset(),
      close: () => inner.close(),
      pendingLane: () => (inner.pendingLane as NonNullable<LineageSqlRunner["pendingLane"]>)(),
    };
    const writer = new LineageWriter(runner, silentLogger, { intervalMs: 1, batchSize: 50 });
    const exec = uuidv7();
    try {
      const rows = Array.from({ length: 2000 }, () => row(exec));
      for (let start = 0; start < rows.length; start += 50) {
        const chunk = rows.slice(start, start + 50);
        for (const r of chunk) writer.record(r);
        // Let the writer take the chunk, then move its rows on while their insert is in flight.
        await new Promise((resolve) => setTimeout(resolve, 2));
        for (const r of chunk) writer.update(r.id, { status: "processing" });
        await new Promise((resolve) => setTimeout(resolve, 2));
        for (const r of chunk) writer.update(r.id, { status: "completed" });
      }
      await writer.flush();
      const { rows: counts } = await db.admin.query<{ status: string; n: number }>(
        "select status, count(*)::int as n from lineage where execution_id = $1 group by status",
        [exec],
      );
      expect(counts).toEqual([{ status: "completed", n: 2000 }]);
      expect(writer.counters()).toMatchObject({ lost: 0, queued: 0 });
    } finally {
      await writer.close();
      await runner.close();
    }
  });
});
