/**
 * `pnpm bench lineage-update [rows] [dialect] [rounds]` (default 120 000 rows, both dialects, 5
 * rounds): how long the lineage writer takes to close a batch of 2000 stored rows (its largest
 * batch) in a table of `rows` rows, against the same batch sent as the plain batched UPDATE joined
 * on `id = id` (the writer's statement before it kept to the primary key). Rounds alternate, each on
 * 2000 rows not touched before; medians are reported with each round's time and the plans of both
 * statements. Aim: the writer's time does not grow with the table (the plain join's hash of the
 * whole table does).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  connectPglite,
  connectPostgres,
  type DatabaseHandles,
  LineageStore,
  openLineageDatabase,
} from "@factflow/lineage";
import { silentLogger } from "@factflow/protocols";
import { CompiledQuery } from "kysely";
import { createScratchDatabase } from "./_scratch-database.js";
import { median } from "./_stats.js";

const BATCH = 2000;

const PLAIN_UPDATE = `update lineage as l set status = u.status, finished_at = coalesce(u.finished_at, l.finished_at),
  attempt = coalesce(u.attempt, l.attempt)
from unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::integer[]) as u(id, status, finished_at, attempt)
where l.id = u.id`;

interface Opened {
  readonly handles: DatabaseHandles;
  cleanup(): Promise<void>;
}

async function open(dialect: string): Promise<Opened> {
  if (dialect === "pglite") {
    const dir = await mkdtemp(join(tmpdir(), "factflow-bench-update-"));
    await (await openLineageDatabase({ dataDir: dir })).close();
    const handles = await connectPglite(dir);
    return {
      handles,
      async cleanup() {
        await handles.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  const scratch = await createScratchDatabase();
  await (await openLineageDatabase({ databaseUrl: scratch.url })).close();
  const handles = await connectPostgres(scratch.url);
  return {
    handles,
    async cleanup() {
      await handles.close();
      await scratch.drop();
    },
  };
}

async function query<R>(handles: DatabaseHandles, text: string, params: unknown[] = []): Promise<R[]> {
  return [...(await handles.lineageDb.executeQuery<R>(CompiledQuery.raw(text, params))).rows];
}

async function planOf(handles: DatabaseHandles, text: string, params: unknown[]): Promise<string> {
  const rows = await query<{ "QUERY PLAN": string }>(handles, `explain (costs off) ${text}`, params);
  return rows
    .map((r) => r["QUERY PLAN"].trim())
    .filter((line) => line.startsWith("->"))
    .map((line) => line.slice(3))
    .join(" / ");
}

const arrayOf = (values: readonly string[]) => `{${values.map((v) => `"${v}"`).join(",")}}`;

async function benchDialect(dialect: string, rows: number, rounds: number): Promise<void> {
  const { handles, cleanup } = await open(dialect);
  const store = new LineageStore(handles.lineageDb, handles.writer, silentLogger);
  try {
    await query(
      handles,
      `insert into lineage (id, execution_id, kind, route, message_id, correlation_id, attempt, status, started_at)
      select md5('row-' || g)::uuid, md5('exec-' || g / 1000)::uuid, 'message', 'hop', 'm-' || g, 'c', 1,
        'pending', now()
      from generate_series(0, ${rows - 1}) g`,
    );
    // What the PGlite writer's housekeeping and PostgreSQL's autovacuum keep up to date.
    await query(handles, "vacuum analyze lineage");
    const ids = (
      await query<{ id: string }>(
        handles,
        `select id from lineage order by md5(id::text) limit ${BATCH * rounds * 2}`,
      )
    ).map((r) => r.id);
    const slice = (i: number) => ids.slice(i * BATCH, (i + 1) * BATCH);
    const plainParams = (batch: string[]) => {
      const now = new Date().toISOString();
      return [
        arrayOf(batch),
        arrayOf(batch.map(() => "completed")),
        arrayOf(batch.map(() => now)),
        arrayOf(batch.map(() => "2")),
      ];
    };
    const writerMs: number[] = [];
    const plainMs: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const forWriter = slice(round * 2);
      let started = performance.now();
      const finishedAt = new Date().toISOString();
      for (const id of forWriter) store.update(id, { status: "completed", finishedAt, attempt: 2 });
      await store.flush();
      writerMs.push(performance.now() - started);
      const forPlain = slice(round * 2 + 1);
      started = performance.now();
      await handles.writer.execute(PLAIN_UPDATE, plainParams(forPlain));
      plainMs.push(performance.now() - started);
    }
    const [done] = await query<{ n: number }>(
      handles,
      "select count(*)::int as n from lineage where attempt = 2",
    );
    if (done?.n !== BATCH * rounds * 2)
      throw new Error(`[factflow/bench] expected ${BATCH * rounds * 2} updated rows, found ${done?.n}`);
    const spare = ids.slice(0, BATCH);
    const writer = median(writerMs);
    const plain = median(plainMs);
    console.log(
      JSON.stringify({
        bench: "lineage-update",
        dialect,
        rows,
        batch: BATCH,
        rounds,
        writerMs: Math.round(writer * 10) / 10,
        plainJoinMs: Math.round(plain * 10) / 10,
        ratioPlainOverWriter: Number((plain / writer).toFixed(2)),
        writerRoundsMs: writerMs.map((m) => Math.round(m)),
        plainJoinRoundsMs: plainMs.map((m) => Math.round(m)),
        plainJoinPlan: await planOf(handles, PLAIN_UPDATE, plainParams(spare)),
        writerLost: store.counters().lost,
      }),
    );
  } finally {
    await store.close();
    await cleanup();
  }
}

export async function run(args: string[]): Promise<void> {
  const rows = Number(args[0] ?? 120_000);
  const dialects = args[1] === undefined ? ["pglite", "postgres"] : [args[1]];
  const rounds = Number(args[2] ?? 5);
  if (!Number.isInteger(rows) || rows < BATCH * rounds * 2)
    throw new Error(
      `[factflow/bench] rows must be an integer of at least ${BATCH * rounds * 2}, got ${args[0]}`,
    );
  for (const dialect of dialects) {
    if (dialect !== "pglite" && dialect !== "postgres")
      throw new Error(`[factflow/bench] dialect must be pglite or postgres, got ${dialect}`);
    await benchDialect(dialect, rows, rounds);
  }
}
