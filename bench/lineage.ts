/**
 * `pnpm bench lineage [N]`: writes N lineage rows the way the route processor does (record the row
 * `pending`, let the "adapter" run, update it `completed`) through the group-commit writer of
 * `@factflow/lineage`, then writes the same N final rows as raw batched multi-row INSERTs (node-postgres
 * on PostgreSQL, PGlite's own `query` on PGlite) into the same table. Writer and baseline rounds
 * alternate (3 each, medians kept); both timings end when the rows are committed. One JSON line per
 * dialect; the aim is a writer/raw ratio ≥ 0.8.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { PGlite } from "@electric-sql/pglite";
import { type LineageDatabase, openLineageDatabase, uuidv7 } from "@factflow/lineage";
import type { LineageRow } from "@factflow/protocols";
import { Client } from "pg";
import { median } from "./_stats.js";

/** Handlers in flight at once, as a route with concurrency 64 would have. */
const CONCURRENCY = 64;
const RAW_BATCH = 1000;
const COLUMNS = [
  "id",
  "execution_id",
  "kind",
  "route",
  "adapter",
  "adapter_index",
  "message_id",
  "correlation_id",
  "parent_id",
  "attempt",
  "status",
  "input_hash",
  "payload",
  "output_keys",
  "error",
  "started_at",
  "finished_at",
] as const;
const JSON_COLUMNS = new Set(["payload", "output_keys", "error"]);

function makeRows(n: number): LineageRow[] {
  const executionId = uuidv7();
  const parent = uuidv7();
  const now = Date.now();
  return Array.from({ length: n }, (_, i) => {
    const messageId = uuidv7();
    return {
      id: uuidv7(),
      executionId,
      kind: "adapter",
      route: `route-${i % 4}`,
      adapter: "md_split",
      adapterIndex: i % 3,
      messageId,
      correlationId: messageId,
      parentId: parent,
      attempt: 1,
      status: "pending",
      inputHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
      startedAt: new Date(now + i).toISOString(),
    } satisfies LineageRow;
  });
}

function finalRow(row: LineageRow): LineageRow {
  return {
    ...row,
    status: "completed",
    outputKeys: [`${row.executionId}/${row.route}/${row.id}.json`],
    finishedAt: new Date().toISOString(),
  };
}

/** The processor's pattern: pending → (adapter runs) → completed, CONCURRENCY handlers at a time. */
async function writerRun(
  db: LineageDatabase,
  rows: readonly LineageRow[],
): Promise<{ rate: number; writes: number }> {
  const before = db.lineage.counters().written;
  const start = performance.now();
  let next = 0;
  const worker = async () => {
    while (next < rows.length) {
      const row = rows[next++]!;
      db.lineage.record(row);
      await new Promise<void>((resolve) => setImmediate(resolve));
      const done = finalRow(row);
      db.lineage.update(row.id, {
        status: "completed",
        outputKeys: done.outputKeys!,
        finishedAt: done.finishedAt!,
      });
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await db.lineage.flush();
  const elapsed = (performance.now() - start) / 1000;
  const { lost } = db.lineage.counters();
  if (lost > 0) throw new Error(`[factflow/bench] the writer lost ${lost} rows`);
  return { rate: rows.length / elapsed, writes: db.lineage.counters().written - before };
}

function valuesOf(row: LineageRow): unknown[] {
  const r = finalRow(row);
  const record: Record<string, unknown> = {
    id: r.id,
    execution_id: r.executionId,
    kind: r.kind,
    route: r.route,
    adapter: r.adapter ?? null,
    adapter_index: r.adapterIndex ?? null,
    message_id: r.messageId,
    correlation_id: r.correlationId,
    parent_id: r.parentId ?? null,
    attempt: r.attempt,
    status: r.status,
    input_hash: r.inputHash ?? null,
    payload: r.payload ?? null,
    output_keys: r.outputKeys ?? null,
    error: r.error ?? null,
    started_at: r.startedAt,
    finished_at: r.finishedAt ?? null,
  };
  return COLUMNS.map((c) =>
    JSON_COLUMNS.has(c) && record[c] !== null ? JSON.stringify(record[c]) : record[c],
  );
}

/** `insert … values ($1, …), (…)` for `count` rows; JSON columns travel as text, as any client would. */
function multiRowInsert(count: number): string {
  const tuples: string[] = [];
  for (let r = 0; r < count; r++) {
    const base = r * COLUMNS.length;
    tuples.push(
      `(${COLUMNS.map((c, i) => `$${base + i + 1}${JSON_COLUMNS.has(c) ? "::text::jsonb" : ""}`).join(", ")})`,
    );
  }
  return `insert into lineage (${COLUMNS.join(", ")}) values ${tuples.join(", ")}`;
}

async function rawRun(
  exec: (text: string, params: unknown[]) => Promise<unknown>,
  rows: readonly LineageRow[],
) {
  const start = performance.now();
  for (let i = 0; i < rows.length; i += RAW_BATCH) {
    const batch = rows.slice(i, i + RAW_BATCH);
    // Final values are computed inside the timing, like the writer computes them.
    await exec(multiRowInsert(batch.length), batch.flatMap(valuesOf));
  }
  return rows.length / ((performance.now() - start) / 1000);
}

function report(dialect: string, writer: { rate: number; writes: number }, raw: number, n: number): void {
  console.log(
    JSON.stringify({
      bench: "lineage",
      dialect,
      n,
      writer_rows_per_s: Math.round(writer.rate),
      raw_rows_per_s: Math.round(raw),
      ratio: Number((writer.rate / raw).toFixed(2)),
      // Rows + updates the writer sent: n means every pending→completed pair merged into one row.
      writer_writes: writer.writes,
    }),
  );
}

const ROUNDS = 3;

/**
 * Alternates writer and baseline rounds on the same table (it grows equally under both), each after a
 * short warm-up, and keeps the median of each: the machine is shared, so single runs are noisy.
 */
async function alternate(
  n: number,
  writerRound: (rows: LineageRow[]) => Promise<{ rate: number; writes: number }>,
  rawRound: (rows: LineageRow[]) => Promise<number>,
): Promise<{ writer: { rate: number; writes: number }; raw: number }> {
  const writer: { rate: number; writes: number }[] = [];
  const raw: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    writer.push(await writerRound(makeRows(n)));
    raw.push(await rawRound(makeRows(n)));
  }
  const rate = median(writer.map((w) => w.rate));
  return { writer: writer.find((w) => w.rate === rate)!, raw: median(raw) };
}

async function benchPostgres(n: number): Promise<void> {
  const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
  const name = `factflow_bench_${Date.now().toString(36)}`;
  const admin = new Client({ connectionString: url });
  admin.on("error", () => {});
  try {
    await admin.connect();
    await admin.query(`create database "${name}"`);
  } catch (error) {
    console.warn(`[factflow/bench] skipping PostgreSQL: ${(error as Error).message}`);
    await admin.end().catch(() => {});
    return;
  }
  const dbUrl = new URL(url);
  dbUrl.pathname = `/${name}`;
  const db = await openLineageDatabase({ databaseUrl: dbUrl.toString() });
  const raw = new Client({ connectionString: dbUrl.toString() });
  raw.on("error", () => {});
  try {
    await raw.connect();
    const exec = (text: string, params: unknown[]) => raw.query(text, params);
    await writerRun(db, makeRows(500));
    await rawRun(exec, makeRows(500));
    const result = await alternate(
      n,
      (rows) => writerRun(db, rows),
      (rows) => rawRun(exec, rows),
    );
    report("postgres", result.writer, result.raw, n);
  } finally {
    await raw.end().catch(() => {});
    await db.close();
    await admin.query(`drop database if exists "${name}" with (force)`);
    await admin.end();
  }
}

async function benchPglite(n: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "factflow-bench-lineage-"));
  try {
    // One PGlite instance per directory at a time: each round opens, warms up, measures, closes.
    const result = await alternate(
      n,
      async (rows) => {
        const db = await openLineageDatabase({ dataDir: dir });
        try {
          await writerRun(db, makeRows(200));
          return await writerRun(db, rows);
        } finally {
          await db.close();
        }
      },
      async (rows) => {
        const pg = await PGlite.create(join(dir, "pglite"));
        try {
          const exec = (text: string, params: unknown[]) => pg.query(text, params);
          await rawRun(exec, makeRows(200));
          return await rawRun(exec, rows);
        } finally {
          await pg.close();
        }
      },
    );
    report("pglite", result.writer, result.raw, n);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `pnpm bench lineage [N] [postgres|pglite]` (default N = 20000, both dialects). */
export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 20_000);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] N must be a positive integer, got ${args[0]}`);
  const only = args[1];
  if (only !== undefined && only !== "postgres" && only !== "pglite") {
    throw new Error(`[factflow/bench] unknown dialect "${only}": use postgres or pglite`);
  }
  if (only !== "pglite") await benchPostgres(n);
  if (only !== "postgres") await benchPglite(n);
}
