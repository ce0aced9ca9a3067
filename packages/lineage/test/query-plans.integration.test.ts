import { type LineageRow, silentLogger } from "@factflow/protocols";
import { type CompiledQuery, Kysely, PostgresDialect } from "kysely";
import { type Client, Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createPostgresSqlRunner,
  type LineageDatabase,
  type LineageDatabaseSchema,
  LineageStore,
  openLineageDatabase,
  uuidv7,
} from "../src/index.js";
import { createTestDatabase, openAdminClient, skipWithoutPostgres } from "./pg-test-database.js";

const skip = await skipWithoutPostgres();

interface PlanNode {
  "Node Type"?: string;
  "Relation Name"?: string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

/** Every "Index Name" in the plan, and every relation it scans sequentially. */
function scansOf(node: PlanNode, into = { indexes: new Set<string>(), seqScans: new Set<string>() }) {
  if (node["Index Name"] !== undefined) into.indexes.add(node["Index Name"]);
  if (node["Node Type"] === "Seq Scan" && node["Relation Name"] !== undefined)
    into.seqScans.add(node["Relation Name"]);
  for (const child of node.Plans ?? []) scansOf(child, into);
  return into;
}

/** Background executions of 1000 rows (message row + two adapter rows per message), mostly closed. */
const FILL_SQL = `insert into lineage (id, execution_id, kind, route, adapter, adapter_index, message_id,
  correlation_id, parent_id, attempt, status, started_at, finished_at)
select md5('row-' || g)::uuid, md5('exec-' || g / 1000)::uuid,
  case when g % 3 = 0 then 'message' else 'adapter' end, 'chunk',
  case when g % 3 > 0 then 'embed' end, case when g % 3 > 0 then g % 3 - 1 end,
  'm-' || g / 3, 'c', case when g % 1000 > 0 then md5('row-' || (g - 1))::uuid end, 1,
  case when g % 997 = 0 then 'pending' when g % 50 = 0 then 'failed' else 'completed' end,
  now(), case when g % 997 <> 0 then now() end
from generate_series(0, 3999) g`;

/**
 * The plans of the lineage store's own queries, with sequential scans switched off so that a missing
 * index shows as another index (or a penalised scan) instead of a plan that is merely cheaper on a
 * small table. The SQL is what the store compiles and sends: it runs on a Kysely instance whose log
 * records each query, and the test EXPLAINs exactly that text with those parameters.
 */
describe.skipIf(skip)("lineage query plans on PostgreSQL", () => {
  let dropDb: (() => Promise<void>) | undefined;
  let db: LineageDatabase | undefined;
  let planner: Client | undefined;
  let kysely: Kysely<LineageDatabaseSchema> | undefined;
  let store: LineageStore;
  const seen: CompiledQuery[] = [];
  const executionId = uuidv7();
  // Message ids that are the ids of their message rows, as the engine makes them, so that the
  // writer folds each settled adapter row into its message row.
  const childMessage = uuidv7();
  const rootMessage = uuidv7();

  beforeAll(async () => {
    const created = await createTestDatabase("factflow_plans");
    dropDb = created.drop;
    db = await openLineageDatabase({ databaseUrl: created.url });
    // The target: a root message row, its adapter row, 100 children hanging off it (message row +
    // adapter row each), the last child still open. Each message row is recorded open and settled
    // after its adapter row, so the settled adapter rows are stored inside their message rows.
    const base = { executionId, correlationId: rootMessage, attempt: 1, startedAt: new Date().toISOString() };
    const rootRow = rootMessage;
    const splitRow = uuidv7();
    const rows: LineageRow[] = [
      { ...base, id: rootRow, kind: "message", route: "ingest", messageId: rootMessage, status: "pending" },
      {
        ...base,
        id: splitRow,
        kind: "adapter",
        route: "ingest",
        adapter: "md_split",
        adapterIndex: 0,
        messageId: rootMessage,
        parentId: rootRow,
        status: "completed",
      },
    ];
    for (let c = 0; c < 100; c++) {
      const messageId = c === 50 ? childMessage : uuidv7();
      const status = c === 99 ? "processing" : "completed";
      const messageRow = messageId;
      rows.push(
        {
          ...base,
          id: messageRow,
          kind: "message",
          route: "chunk",
          messageId,
          parentId: splitRow,
          parentMessageId: rootMessage,
          status: "pending",
        },
        {
          ...base,
          id: uuidv7(),
          kind: "adapter",
          route: "chunk",
          adapter: "embed",
          adapterIndex: 0,
          messageId,
          parentId: messageRow,
          status,
        },
      );
    }
    for (const r of rows) db.lineage.record(r);
    for (const r of rows)
      if (r.kind === "message" && r.messageId !== rows[rows.length - 2]?.messageId)
        db.lineage.update(r.id, { status: "completed", attempt: 1 });
    await db.lineage.flush();

    planner = await openAdminClient(created.url);
    await planner.query(FILL_SQL);
    await planner.query("analyze lineage");
    // One connection, so the setting holds for every EXPLAIN below.
    await planner.query("set enable_seqscan = off");

    kysely = new Kysely<LineageDatabaseSchema>({
      dialect: new PostgresDialect({ pool: new Pool({ connectionString: created.url, max: 2 }) }),
      log(event) {
        if (event.level === "query") seen.push(event.query);
      },
    });
    store = new LineageStore(kysely, createPostgresSqlRunner(created.url), silentLogger);
  });

  afterAll(async () => {
    await store?.close();
    await kysely?.destroy();
    await planner?.end();
    await db?.close();
    await dropDb?.();
  });

  /** Runs `call` on the recording store, then EXPLAINs every statement it sent. */
  async function plansOf<T>(
    call: () => Promise<T>,
  ): Promise<{ result: T; scans: ReturnType<typeof scansOf> }> {
    seen.length = 0;
    const result = await call();
    expect(seen.length).toBeGreaterThan(0);
    const scans = { indexes: new Set<string>(), seqScans: new Set<string>() };
    for (const query of [...seen]) {
      const {
        rows: [row],
      } = await planner!.query(`explain (format json) ${query.sql}`, [...query.parameters]);
      const plan = (row?.["QUERY PLAN"] as { Plan: PlanNode }[] | undefined)?.[0]?.Plan;
      expect(plan, query.sql).toBeDefined();
      scansOf(plan as PlanNode, scans);
    }
    return { result, scans };
  }

  it("stores settled adapter rows inside their message rows", async () => {
    const { rows } = await planner!.query(
      "select count(*)::int as n, count(invocations)::int as folded from lineage where execution_id = $1",
      [executionId],
    );
    // 101 message rows and the open child's adapter row; the other 100 adapter rows folded.
    expect(rows[0]).toEqual({ n: 102, folded: 100 });
  });

  it("counts the completion gate's open rows through lineage_open_idx", async () => {
    const { result, scans } = await plansOf(() => store.countOpen(executionId));
    expect(result).toBe(2);
    expect([...scans.indexes]).toContain("lineage_open_idx");
    expect([...scans.seqScans]).not.toContain("lineage");
  });

  it("finds the rows of one message through lineage_message_idx", async () => {
    const { result, scans } = await plansOf(() => store.messageStatus(executionId, childMessage));
    expect(result).toEqual({ status: "completed", attempt: 1 });
    expect([...scans.indexes]).toContain("lineage_message_idx");
    expect([...scans.seqScans]).not.toContain("lineage");
  });

  it("walks the tree of one message through lineage_message_idx and down lineage_child_message_idx", async () => {
    const { result: tree, scans } = await plansOf(() => store.tree(executionId, childMessage));
    const result = tree.items;
    // The child's two rows and the root's two (the message it descends from).
    expect(result.map((r) => r.route).sort()).toEqual(["chunk", "chunk", "ingest", "ingest"]);
    expect([...scans.indexes]).toEqual(
      expect.arrayContaining(["lineage_message_idx", "lineage_child_message_idx"]),
    );
    expect([...scans.seqScans]).not.toContain("lineage");
  });

  it("walks down from the root to every child message and its adapter row", async () => {
    const { result: tree, scans } = await plansOf(() => store.tree(executionId, rootMessage));
    const result = tree.items;
    expect(result).toHaveLength(202);
    expect(result.filter((r) => r.kind === "message" && r.route === "chunk")).toHaveLength(100);
    expect([...scans.seqScans]).not.toContain("lineage");
  });

  it("reads per-execution pages, counts and route inputs through lineage_message_idx", async () => {
    const page = await plansOf(() => store.rows(executionId, { route: "chunk", kind: "message", limit: 10 }));
    expect(page.result.total).toBe(100);
    const counts = await plansOf(() => store.countsByRoute(executionId));
    expect(counts.result).toContainEqual({ route: "chunk", kind: "adapter", status: "completed", count: 99 });
    const inputs = await plansOf(() => store.routeInputs(executionId, "chunk"));
    expect(inputs.result).toHaveLength(100);
    for (const { scans } of [page, counts, inputs]) {
      expect([...scans.indexes]).toContain("lineage_message_idx");
      expect([...scans.seqScans]).not.toContain("lineage");
    }
  });
});
