import { type LineageRow, type Logger, silentLogger } from "@factflow/protocols";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createPostgresSqlRunner,
  type DatabaseHandles,
  type LineageSqlRunner,
  LineageWriter,
  uuidv7,
} from "../src/index.js";
import { fromStoredRow, type StoredLineageRow } from "../src/lineage-rows.js";
import { row } from "./lineage-suite.js";
import { type MigratedTarget, migratedDialects } from "./migrated-targets.js";

// A real node-postgres pool aimed at a port nobody listens on: every commit fails fast.
const unreachable = () =>
  createPostgresSqlRunner("postgres://postgres@127.0.0.1:1/none", { connectTimeoutSeconds: 1 });

function capture(): { logger: Logger; errors: string[]; warnings: string[] } {
  const errors: string[] = [];
  const warnings: string[] = [];
  const logger: Logger = {
    ...silentLogger,
    warn: (m) => warnings.push(m),
    error: (m) => errors.push(m),
    child: () => logger,
  };
  return { logger, errors, warnings };
}

describe("lineage writer", () => {
  it("caps its queue: writes beyond maxQueued are counted lost and logged, never thrown", async () => {
    const runner = unreachable();
    const { logger, errors } = capture();
    const writer = new LineageWriter(runner, logger, { maxQueued: 5, attempts: 1 });
    const exec = uuidv7();
    for (let i = 0; i < 8; i++) writer.record(row(exec));
    expect(writer.counters()).toMatchObject({ lost: 3, queued: 5 });
    expect(errors[0]).toMatch(/queue full/);
    await writer.flush();
    expect(writer.counters()).toMatchObject({ lost: 8, queued: 0, written: 0 });
    await runner.close();
  });

  it("resolves a flush whose queued update was replaced by a later record", async () => {
    const runner = unreachable();
    const writer = new LineageWriter(runner, silentLogger, { attempts: 1 });
    const r = row(uuidv7());
    writer.update(r.id, { status: "completed" });
    const flushed = writer.flush();
    writer.record(r);
    await flushed;
    expect(writer.counters()).toMatchObject({ queued: 0, lost: 1 });
    await runner.close();
  });

  it("folds updates of a queued row into it and keeps the last status", async () => {
    const runner = unreachable();
    const writer = new LineageWriter(runner, silentLogger, { attempts: 1 });
    const r = row(uuidv7());
    writer.record(r);
    writer.update(r.id, { status: "processing" });
    writer.update(r.id, { status: "completed" });
    expect(writer.counters().queued).toBe(1);
    await writer.flush();
    expect(writer.counters()).toMatchObject({ lost: 1, queued: 0 });
    await writer.close();
    expect(() => writer.record(row(uuidv7()))).toThrow(/closed/);
    await runner.close();
  });
});

const ERR = { class: "E", message: 'it "broke", badly', retryable: true, fatal: false };

const dialects = await migratedDialects("factflow-writer-copy");

describe.each(dialects)("lineage writer on $dialect (COPY path)", ({ open }) => {
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

  it("sends new rows as one COPY and keeps awkward text and JSON exactly", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    const awkward = [`a,"b"\nc\r\nd`, "\\.", "", "\\N", "naïve ☃ 🚀", 'ends with quote"', "tab\there"];
    const rows = awkward.map((text, i) =>
      row(exec, {
        kind: "message",
        route: text,
        correlationId: text,
        messageId: `m-${i}-${text}`,
        payload: { text, list: [text, 1, null, true], nested: { [text]: { quote: '"' } } },
        ...(i === 0 ? {} : { outputKeys: [text, "k,2"] }),
        ...(i === 1 ? { error: { class: "E", message: text, retryable: false, fatal: false } } : {}),
        ...(i === 2 ? { payload: text } : {}),
      }),
    );
    const before = { ...calls };
    for (const r of rows) writer.record(r);
    await writer.flush();
    expect(calls.copy - before.copy).toBe(1);
    expect(calls.execute - before.execute).toBe(0);
    for (const r of rows) expect(await stored(r.id)).toEqual(r);
    expect(writer.counters()).toMatchObject({ written: rows.length, lost: 0 });
  });

  it("keeps SQL NULL and empty strings apart, and absent JSON columns absent", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const r = row(uuidv7(), { correlationId: "", inputHash: "", payload: null });
    writer.record(r);
    await writer.flush();
    const back = await stored(r.id);
    expect(back?.correlationId).toBe("");
    expect(back?.inputHash).toBe("");
    expect(back).not.toHaveProperty("payload");
    expect(back).not.toHaveProperty("finishedAt");
    expect(back).not.toHaveProperty("outputKeys");
  });

  it("keeps timestamps to the microsecond, before 2000 and with offsets, in the binary COPY", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    const cases = [
      ["1999-12-31T23:59:59.123456Z", "1999-12-31T23:59:59.123456"],
      ["1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000"],
      ["2026-12-03T08:15:24.0301+02:00", "2026-12-03T06:15:24.030100"],
      ["2026-12-03T06:15:24.5Z", "2026-12-03T06:15:24.500000"],
    ] as const;
    const rows = cases.map(([startedAt]) => row(exec, { startedAt }));
    const before = { ...calls };
    for (const r of rows) writer.record(r);
    await writer.flush();
    expect(calls.copy - before.copy).toBe(1);
    expect(calls.execute - before.execute).toBe(0);
    for (const [i, [, utc]] of cases.entries()) {
      const found = await sql<{ at: string }>`select to_char(started_at at time zone 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.US') as at from lineage where id = ${rows[i]!.id}::uuid`.execute(handles.db);
      expect(found.rows[0]?.at).toBe(utc);
    }
  });

  it("sends a batch the binary encoding cannot take as the upsert, and the database judges it", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    // PostgreSQL reads 'epoch'; Date.parse does not.
    const odd = row(exec, { finishedAt: "epoch", status: "completed" });
    const plain = row(exec);
    const before = { ...calls };
    writer.record(odd);
    writer.record(plain);
    await writer.flush();
    expect(calls.copy - before.copy).toBe(0);
    expect(calls.execute - before.execute).toBe(1);
    expect((await stored(odd.id))?.finishedAt).toBe("1970-01-01T00:00:00.000Z");
    expect(await stored(plain.id)).toEqual(plain);
    expect(writer.counters()).toMatchObject({ written: 2, lost: 0 });
  });

  it("falls back to the upsert when a batch holds an id that is already stored", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    const first = row(exec);
    writer.record(first);
    await writer.flush();
    // Recorded again (e.g. a retried batch whose first attempt did commit), next to a new row.
    const again = { ...first, status: "completed" as const, finishedAt: new Date().toISOString() };
    const fresh = row(exec);
    const before = { ...calls };
    writer.record(again);
    writer.record(fresh);
    await writer.flush();
    expect(calls.copy - before.copy).toBe(1);
    expect(calls.execute - before.execute).toBe(1);
    expect(await stored(first.id)).toEqual(again);
    expect(await stored(fresh.id)).toEqual(fresh);
    expect(writer.counters()).toMatchObject({ written: 3, lost: 0 });
  });

  it("never lets a duplicate registration or record undo a queued completion", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    const child = row(exec, { kind: "message" });
    await writer.registerPending([child]);
    const finishedAt = new Date().toISOString();
    // The consumer completes the child; before that update commits, a re-run of the parent (a
    // broker redelivery) registers the same deterministic child id again as pending.
    writer.update(child.id, { status: "completed", finishedAt });
    await writer.registerPending([child]);
    await writer.flush();
    expect((await stored(child.id))?.status).toBe("completed");
    // The same through record(): a queued completion survives a later pending record.
    const other = row(exec, { kind: "message" });
    await writer.registerPending([other]);
    writer.update(other.id, { status: "completed", finishedAt });
    writer.record(other);
    await writer.flush();
    expect((await stored(other.id))?.status).toBe("completed");
    // A higher attempt still wins (a retry restarts the row at pending).
    writer.update(other.id, { status: "pending", attempt: 2 });
    await writer.flush();
    expect(await stored(other.id)).toMatchObject({ status: "pending", attempt: 2 });
  });

  it("updates small batches (ids listed for the planner) and large ones alike", async () => {
    const writer = new LineageWriter(runner, silentLogger);
    const exec = uuidv7();
    for (const size of [3, 150]) {
      const rows = Array.from({ length: size }, () => row(exec));
      for (const r of rows) writer.record(r);
      await writer.flush();
      const finishedAt = new Date().toISOString();
      for (const r of rows)
        writer.update(r.id, { status: "failed", attempt: 2, finishedAt, outputKeys: ["k"], error: ERR });
      await writer.flush();
      for (const r of rows)
        expect(await stored(r.id)).toEqual({
          ...r,
          status: "failed",
          attempt: 2,
          finishedAt,
          outputKeys: ["k"],
          error: ERR,
        });
    }
    expect(writer.counters()).toMatchObject({ written: 2 * (3 + 150), lost: 0 });
  });

  it("loses only the row the database rejects, via the one-by-one retry", async () => {
    const { logger, warnings } = capture();
    const writer = new LineageWriter(runner, logger);
    const exec = uuidv7();
    const good = row(exec);
    // jsonb cannot hold a lone surrogate (a NUL would be stored escaped instead: nul-escape.ts).
    const bad = row(exec, { payload: { text: "lone \ud800 surrogate" } });
    writer.record(good);
    writer.record(bad);
    await writer.flush();
    expect(warnings.some((w) => /one by one/.test(w))).toBe(true);
    expect(await stored(good.id)).toEqual(good);
    expect(await stored(bad.id)).toBeUndefined();
    expect(writer.counters()).toMatchObject({ written: 1, lost: 1 });
  });

  it("stores a row and an update holding NUL characters escaped, and names the columns", async () => {
    const { logger, warnings } = capture();
    const writer = new LineageWriter(runner, logger);
    const exec = uuidv7();
    const good = row(exec);
    const bad = row(exec, {
      kind: "message",
      route: "r\u0000",
      payload: ["\u0000", { "\u0000": "\u0000\u0000" }],
    });
    writer.record(good);
    writer.record(bad);
    await writer.flush();
    writer.update(good.id, { status: "failed", error: { ...ERR, message: "nul \u0000" } });
    await writer.flush();
    expect(warnings.filter((w) => /NUL characters/.test(w))).toHaveLength(2);
    expect(await stored(bad.id)).toEqual({
      ...bad,
      route: "r\\u0000",
      payload: ["\\u0000", { "\\u0000": "\\u0000\\u0000" }],
      sanitised: ["payload", "route"],
    });
    expect(await stored(good.id)).toEqual({
      ...good,
      status: "failed",
      error: { ...ERR, message: "nul \\u0000" },
      sanitised: ["error"],
    });
    expect(writer.counters()).toMatchObject({ written: 3, lost: 0 });
  });
});
