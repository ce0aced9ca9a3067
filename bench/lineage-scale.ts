/**
 * `pnpm bench lineage-scale [rows] [rounds]` (default 2 000 000 rows, 200 calls per query): shows
 * that the lineage indexes keep the per-execution reads flat as the table grows.
 *
 * In a fresh PostgreSQL database (migrated by `openLineageDatabase`) it writes one target execution
 * through the lineage writer: a root message whose adapter fans out to 1000 children, each with a
 * message row and two adapter rows, the last five children still open (3002 rows, 15 open). With a
 * small table around it (7000 rows of 7 other executions, ANALYZEd) it times `countOpen` (the
 * completion gate), `tree` (of one child message), `rows` (first page of 50) and `countsByRoute` of
 * the target, `rounds` calls each after a warm-up: that is the baseline. It then fills the table
 * server-side (`insert … select … from generate_series`) to `rows` rows across executions of 1000
 * rows (mostly completed, ~1% failed, ~0.3% abandoned, ~0.004% open), ANALYZEs, and times the same
 * calls on the same target again. The aim is a large/small p50 ratio within ~2-3x per query.
 *
 * For the plans it replays, under `EXPLAIN (FORMAT JSON)`, the very SQL the store sends: a second
 * `LineageStore` runs on a Kysely instance whose log records each compiled query. The line lists
 * the indexes each plan uses and whether it has a Seq Scan on `lineage`, for the large table
 * (`indexes`, `seq_scan`) and the small one (`small_…`, where the planner may rightly prefer a scan).
 *
 * PostgreSQL only: PGlite is one in-process WASM backend, for one process's development data; filling
 * it with millions of rows takes minutes and most of a gigabyte of memory, and its planner and
 * indexes are PostgreSQL's own, so the plans shown here hold for it too.
 */
import { performance } from "node:perf_hooks";
import {
  createPostgresSqlRunner,
  type LineageDatabase,
  type LineageDatabaseSchema,
  LineageStore,
  openLineageDatabase,
  uuidv7,
} from "@factflow/lineage";
import { type LineageProtocol, type LineageRow, silentLogger } from "@factflow/protocols";
import { type CompiledQuery, Kysely, PostgresDialect } from "kysely";
import { Pool } from "pg";
import { createScratchDatabase } from "./_scratch-database.js";
import { percentile } from "./_stats.js";

const CHILDREN = 1000;
/** Children at the end of the fan-out still being handled: message + adapter rows open. */
const OPEN_CHILDREN = 5;
const TARGET_ROWS = 2 + CHILDREN * 3;
const SMALL_FILL = 7000;
const FILL_CHUNK = 250_000;
const WARMUP = 50;

/** The target execution, shaped like a fan-out run: root message → md_split → 1000 children. */
function targetRows(executionId: string): LineageRow[] {
  const start = Date.now();
  let tick = 0;
  const at = () => new Date(start + tick++).toISOString();
  const rootMessage = uuidv7();
  const rootRow = uuidv7();
  const splitRow = uuidv7();
  const done = (row: LineageRow): LineageRow => ({ ...row, finishedAt: at() });
  const rows: LineageRow[] = [
    done({
      id: rootRow,
      executionId,
      kind: "message",
      route: "ingest",
      messageId: rootMessage,
      correlationId: rootMessage,
      attempt: 1,
      status: "completed",
      payload: { path: "docs/handbook.md" },
      startedAt: at(),
    }),
    done({
      id: splitRow,
      executionId,
      kind: "adapter",
      route: "ingest",
      adapter: "md_split",
      adapterIndex: 0,
      messageId: rootMessage,
      correlationId: rootMessage,
      parentId: rootRow,
      attempt: 1,
      status: "completed",
      outputKeys: [`${executionId}/ingest/${splitRow}.json`],
      startedAt: at(),
    }),
  ];
  for (let c = 0; c < CHILDREN; c++) {
    const open = c >= CHILDREN - OPEN_CHILDREN;
    const messageId = uuidv7();
    let parentId = splitRow;
    for (const [index, adapter] of [undefined, "embed", "store"].entries()) {
      const id = uuidv7();
      const row: LineageRow = {
        id,
        executionId,
        kind: adapter === undefined ? "message" : "adapter",
        route: "chunk",
        ...(adapter === undefined
          ? { payload: { chunk: c, text: "x".repeat(64) } }
          : { adapter, adapterIndex: index - 1 }),
        messageId,
        correlationId: rootMessage,
        parentId,
        attempt: 1,
        status: open ? (index === 2 ? "pending" : "processing") : "completed",
        startedAt: at(),
      };
      rows.push(open ? row : done(row));
      parentId = id;
    }
  }
  return rows;
}

/** Background executions of 1000 rows each (same shape, smaller fan-out), rows [from, to). */
const FILL_SQL = `insert into lineage (id, execution_id, kind, route, adapter, adapter_index, message_id,
  correlation_id, parent_id, attempt, status, input_hash, payload, output_keys, error, started_at, finished_at)
select md5('row-' || g)::uuid, md5('exec-' || e)::uuid,
  case when r = 0 then 'message' else 'adapter' end,
  case when j = 0 then 'ingest' else 'chunk-' || (j % 4) end,
  case r when 1 then 'md_split' when 2 then 'embed' end,
  case when r > 0 then r - 1 end,
  'm-' || e || '-' || j, 'm-' || e || '-0',
  case when r > 0 then md5('row-' || (g - 1))::uuid when j > 0 then md5('row-' || (e * 1000 + 2))::uuid end,
  1, st, md5(g::text) || md5(e::text),
  case when r = 0 then jsonb_build_object('text', repeat('x', 64), 'n', g) end,
  case when st = 'completed' and r > 0 then jsonb_build_array('bench/' || e || '/' || g || '.json') end,
  case when st = 'failed' then '{"class":"TransientError","message":"boom","retryable":true,"fatal":false}'::jsonb end,
  timestamptz '2024-01-01' + g * interval '10 milliseconds',
  case when st not in ('pending', 'processing') then timestamptz '2024-01-01' + g * interval '10 milliseconds' + interval '5 milliseconds' end
from generate_series($1::bigint, $2::bigint - 1) g,
  lateral (select g / 1000 as e, (g % 1000) / 3 as j, g % 1000 % 3 as r,
    case when (g * 7919) % 100000 < 2 then 'pending' when (g * 7919) % 100000 < 4 then 'processing'
      when (g * 7919) % 100000 < 1000 then 'failed' when (g * 7919) % 100000 < 1300 then 'abandoned'
      else 'completed' end as st) v`;

const FILL_EXECUTIONS_SQL = `insert into pipeline_executions (id, config_name, config_version, status, config_snapshot, created_at, finished_at)
select md5('exec-' || e)::uuid, 'bench', 1, 'completed', '{}'::jsonb, timestamptz '2024-01-01' + e * interval '10 seconds',
  timestamptz '2024-01-01' + e * interval '10 seconds' + interval '10 seconds'
from generate_series($1::bigint, $2::bigint) e on conflict (id) do nothing`;

async function fill(raw: Pool, from: number, to: number, progress: boolean): Promise<void> {
  for (let start = from; start < to; start += FILL_CHUNK) {
    const end = Math.min(to, start + FILL_CHUNK);
    await raw.query(FILL_EXECUTIONS_SQL, [Math.floor(start / 1000), Math.floor((end - 1) / 1000)]);
    await raw.query(FILL_SQL, [start, end]);
    if (progress) console.error(`[factflow/bench] lineage-scale: filled ${end + TARGET_ROWS} rows`);
  }
}

interface PlanNode {
  "Node Type"?: string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

/** Index names used by the plan and whether it scans `lineage` sequentially. */
function planSummary(node: PlanNode, into = { indexes: new Set<string>(), seqScan: false }) {
  if (node["Index Name"] !== undefined) into.indexes.add(node["Index Name"]);
  if (node["Node Type"] === "Seq Scan" && node["Relation Name"] === "lineage") into.seqScan = true;
  for (const child of node.Plans ?? []) planSummary(child, into);
  return into;
}

type Calls = Record<string, (lineage: LineageProtocol) => Promise<unknown>>;

/** EXPLAINs what each call sends (all its statements) through a recording store. */
async function explainCalls(url: string, raw: Pool, calls: Calls) {
  const seen: CompiledQuery[] = [];
  // A store whose Kysely log records every statement it sends, so the very same SQL is EXPLAINed.
  const pool = new Pool({ connectionString: url, max: 1 });
  // A connection the server closes while idle must not take the process down (an unhandled 'error').
  pool.on("error", () => {});
  const db = new Kysely<LineageDatabaseSchema>({
    dialect: new PostgresDialect({ pool }),
    log(event) {
      if (event.level === "query") seen.push(event.query);
    },
  });
  const runner = createPostgresSqlRunner(url);
  const store = new LineageStore(db, runner, silentLogger);
  const result: Record<string, { indexes: string[]; seq_scan: boolean }> = {};
  try {
    for (const [name, call] of Object.entries(calls)) {
      seen.length = 0;
      await call(store);
      const summary = { indexes: new Set<string>(), seqScan: false };
      for (const query of [...seen]) {
        const {
          rows: [row],
        } = await raw.query(`explain (format json) ${query.sql}`, [...query.parameters]);
        const plan = (row?.["QUERY PLAN"] as { Plan: PlanNode }[] | undefined)?.[0]?.Plan;
        if (plan === undefined) throw new Error(`[factflow/bench] no plan for ${name}: ${query.sql}`);
        planSummary(plan, summary);
      }
      result[name] = { indexes: [...summary.indexes].sort(), seq_scan: summary.seqScan };
    }
  } finally {
    await store.close();
    await runner.close();
    await db.destroy();
  }
  return result;
}

async function time(call: () => Promise<unknown>, rounds: number): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < WARMUP; i++) await call();
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99) };
}

async function timeCalls(lineage: LineageProtocol, calls: Calls, rounds: number) {
  const result: Record<string, { p50: number; p99: number }> = {};
  for (const [name, call] of Object.entries(calls)) result[name] = await time(() => call(lineage), rounds);
  return result;
}

/** Fails the run when the target no longer reads as written: the fill must not touch it. */
async function checkTarget(lineage: LineageProtocol, executionId: string, messageId: string): Promise<void> {
  const open = await lineage.countOpen(executionId);
  const tree = await lineage.tree(executionId, messageId);
  const page = await lineage.rows(executionId, { limit: 50 });
  const counts = await lineage.countsByRoute(executionId);
  const counted = counts.reduce((sum, c) => sum + c.count, 0);
  if (
    open !== OPEN_CHILDREN * 3 ||
    tree.items.length !== 5 ||
    page.total !== TARGET_ROWS ||
    counted !== TARGET_ROWS
  ) {
    throw new Error(
      `[factflow/bench] the target execution reads wrong: open ${open}, tree ${tree.items.length}, total ${page.total}, counted ${counted}`,
    );
  }
}

const ms = (value: number) => Number(value.toFixed(3));

/** `pnpm bench lineage-scale [rows] [rounds]`. */
export async function run(args: string[]): Promise<void> {
  const rows = Number(args[0] ?? 2_000_000);
  const rounds = Number(args[1] ?? 200);
  const small = TARGET_ROWS + SMALL_FILL;
  if (!Number.isInteger(rows) || rows <= small)
    throw new Error(`[factflow/bench] rows must be an integer above ${small}, got ${args[0]}`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] rounds must be a positive integer, got ${args[1]}`);

  const scratch = await createScratchDatabase();
  const url = scratch.url;
  let db: LineageDatabase | undefined;
  const raw = new Pool({ connectionString: url, max: 2 });
  raw.on("error", () => {});
  try {
    db = await openLineageDatabase({ databaseUrl: url });
    const executionId = uuidv7();
    await raw.query(
      `insert into pipeline_executions (id, config_name, config_version, status, config_snapshot)
        values ($1, 'bench-target', 1, 'running', '{}'::jsonb)`,
      [executionId],
    );
    const target = targetRows(executionId);
    for (const row of target) db.lineage.record(row);
    await db.lineage.flush();
    const child = target[2 + 3 * (CHILDREN / 2)]!.messageId;
    const calls: Calls = {
      countOpen: (l) => l.countOpen(executionId),
      tree: (l) => l.tree(executionId, child),
      rows: (l) => l.rows(executionId, { limit: 50 }),
      countsByRoute: (l) => l.countsByRoute(executionId),
    };

    await fill(raw, 0, SMALL_FILL, false);
    await raw.query("analyze");
    await checkTarget(db.lineage, executionId, child);
    const before = await timeCalls(db.lineage, calls, rounds);
    const smallPlans = await explainCalls(url, raw, calls);

    const fillStart = performance.now();
    await fill(raw, SMALL_FILL, rows - TARGET_ROWS, rows >= 1_000_000);
    const fillMs = performance.now() - fillStart;
    const analyzeStart = performance.now();
    await raw.query("analyze");
    const analyzeMs = performance.now() - analyzeStart;
    const {
      rows: [{ count, bytes } = { count: 0, bytes: "0" }],
    } = await raw.query<{ count: number; bytes: string }>(
      "select count(*)::int as count, pg_total_relation_size('lineage') as bytes from lineage",
    );
    if (count !== rows) throw new Error(`[factflow/bench] expected ${rows} lineage rows, found ${count}`);
    await checkTarget(db.lineage, executionId, child);
    const after = await timeCalls(db.lineage, calls, rounds);
    const plans = await explainCalls(url, raw, calls);

    const queries: Record<string, unknown> = {};
    for (const query of Object.keys(calls)) {
      const s = before[query]!;
      const l = after[query]!;
      queries[query] = {
        small_p50_ms: ms(s.p50),
        small_p99_ms: ms(s.p99),
        large_p50_ms: ms(l.p50),
        large_p99_ms: ms(l.p99),
        ratio_p50: Number((l.p50 / s.p50).toFixed(2)),
        ...plans[query],
        small_indexes: smallPlans[query]?.indexes,
        small_seq_scan: smallPlans[query]?.seq_scan,
      };
    }
    console.log(
      JSON.stringify({
        bench: "lineage-scale",
        dialect: "postgres",
        rows,
        small_rows: small,
        target_rows: TARGET_ROWS,
        rounds,
        fill_ms: Math.round(fillMs),
        analyze_ms: Math.round(analyzeMs),
        table_mb: Math.round(Number(bytes) / 2 ** 20),
        queries,
      }),
    );
  } finally {
    await raw.end();
    await db?.close().catch(() => {});
    await scratch.drop();
  }
}
