import { silentLogger } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createPostgresSqlRunner, LineageWriter, uuidv7 } from "../src/index.js";
import { row } from "./lineage-suite.js";
import { skipWithoutPostgres, useMigratedDatabase } from "./pg-test-database.js";

const skip = await skipWithoutPostgres();

describe.skipIf(skip)("lineage writer pending lane on PostgreSQL", () => {
  const db = useMigratedDatabase("factflow_lane");

  const statusOf = async (id: string) =>
    (
      await db.admin.query<{ status: string; attempt: number }>(
        "select status, attempt from lineage where id = $1",
        [id],
      )
    ).rows[0];
  const countOf = async (text: string, value: string) =>
    (await db.admin.query<{ n: number }>(text, [value])).rows[0]?.n;

  it("commits on a connection of its own, durable on return, while bulk writes keep flowing", async () => {
    const app = `factflow-lane-${Math.random().toString(36).slice(2, 8)}`;
    const runner = createPostgresSqlRunner(db.url, { applicationName: app });
    expect(runner.pendingLane?.()).toBe(runner.pendingLane?.());
    expect(runner.pendingLane?.()).not.toBe(runner);
    // Bulk batches go out as a COPY; the lane's small commits as a one-round-trip INSERT.
    expect(runner.copy).toBeDefined();
    expect(runner.pendingLane?.()?.copy).toBeUndefined();
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    try {
      for (let i = 0; i < 3000; i++) writer.record(row(exec, { status: "completed" }));
      const children = Array.from({ length: 20 }, () => row(exec, { kind: "message" }));
      await Promise.all(children.map((c) => writer.registerPending([c])));
      for (const c of children) expect(await statusOf(c.id)).toEqual({ status: "pending", attempt: 1 });
      const lanes = await countOf(
        "select count(*)::int as n from pg_stat_activity where application_name = $1",
        `${app}-pending`,
      );
      expect(lanes).toBeGreaterThan(0);
      await writer.flush();
      expect(await countOf("select count(*)::int as n from lineage where execution_id = $1", exec)).toBe(
        3020,
      );
      expect(writer.counters()).toMatchObject({ written: 3020, lost: 0, queued: 0 });
    } finally {
      await writer.close();
      await runner.close();
    }
  });

  it("keeps the newer status when an insert of the same row lands after an update", async () => {
    const runner = createPostgresSqlRunner(db.url);
    const writer = new LineageWriter(runner, silentLogger);
    try {
      const r = row(uuidv7());
      await writer.registerPending([r]);
      writer.update(r.id, { status: "completed" });
      await writer.flush();
      writer.record(r);
      await writer.flush();
      expect(await statusOf(r.id)).toEqual({ status: "completed", attempt: 1 });
      writer.record({ ...r, status: "failed", attempt: 2 });
      await writer.flush();
      expect(await statusOf(r.id)).toEqual({ status: "failed", attempt: 2 });
    } finally {
      await writer.close();
      await runner.close();
    }
  });

  it("registers a row already stored (a redelivery) beside new ones: the plain insert falls back to the upsert", async () => {
    const runner = createPostgresSqlRunner(db.url);
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    try {
      const again = row(exec, { kind: "message" });
      await writer.registerPending([again]);
      writer.update(again.id, { status: "completed" });
      await writer.flush();
      // One lane batch: a new row and the stored one. Its plain INSERT meets the stored id.
      const fresh = row(exec, { kind: "message" });
      await Promise.all([writer.registerPending([fresh]), writer.registerPending([again])]);
      expect(await statusOf(fresh.id)).toEqual({ status: "pending", attempt: 1 });
      // The upsert's guard: a duplicate `pending` never takes back a completion.
      expect(await statusOf(again.id)).toEqual({ status: "completed", attempt: 1 });
      expect(writer.counters()).toMatchObject({ lost: 0, queued: 0 });
      expect(await countOf("select count(*)::int as n from lineage where execution_id = $1", exec)).toBe(2);
    } finally {
      await writer.close();
      await runner.close();
    }
  });

  it("survives its pending-lane connection being terminated without losing a registration", async () => {
    const app = `factflow-lane-${Math.random().toString(36).slice(2, 8)}`;
    const runner = createPostgresSqlRunner(db.url, { applicationName: app });
    const writer = new LineageWriter(runner, silentLogger, { retryDelayMs: 10, attemptTimeoutMs: 3000 });
    const exec = uuidv7();
    try {
      let terminated = 0;
      for (let round = 0; round < 5; round++) {
        const registered = Promise.all(
          Array.from({ length: 20 }, () => writer.registerPending([row(exec, { kind: "message" })])),
        );
        const killed = await db.admin.query(
          "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1",
          [`${app}-pending`],
        );
        terminated += killed.rows.length;
        await registered;
      }
      expect(terminated).toBeGreaterThan(0);
      expect(writer.counters()).toMatchObject({ lost: 0, queued: 0, written: 100 });
      expect(await countOf("select count(*)::int as n from lineage where execution_id = $1", exec)).toBe(100);
    } finally {
      await writer.close();
      await runner.close();
    }
  });
});
