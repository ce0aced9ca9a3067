import { CompiledQuery } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type PendingUpdate, updateRowsStatement } from "../src/lineage-sql.js";
import { type MigratedTarget, migratedDialects } from "./migrated-targets.js";

/** 40 000 open rows of 40 executions: enough that hashing the table looks cheaper than 2000 probes. */
const FILL_SQL = `insert into lineage (id, execution_id, kind, route, message_id, correlation_id, attempt,
  status, started_at)
select md5('row-' || g)::uuid, md5('exec-' || g / 1000)::uuid, 'message', 'chunk', 'm-' || g, 'c', 1,
  'pending', now()
from generate_series(0, 39999) g`;

/** The writer's largest batch (`batchSize`). */
const BATCH = 2000;

interface PlanNode {
  "Node Type"?: string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Plan Rows"?: number;
  Plans?: PlanNode[];
}

function nodesOf(node: PlanNode, into: PlanNode[] = []): PlanNode[] {
  into.push(node);
  for (const child of node.Plans ?? []) nodesOf(child, into);
  return into;
}

const dialects = await migratedDialects("factflow-update-plan");

/**
 * The writer's batched UPDATE must reach each row through the primary key, never by reading the
 * whole table: a statement planned with its real batch size (PGlite plans every one that way) chose
 * a hash join over a sequential scan once the batch was large, so each batch cost time in proportion
 * to the table (lineage-sql.ts).
 */
describe.each(dialects)("the writer's batched update on $dialect", ({ open }) => {
  let target: MigratedTarget | undefined;
  let ids: string[] = [];

  const run = async <R>(text: string, params: readonly unknown[] = []): Promise<R[]> => {
    const result = await target!.handles.lineageDb.executeQuery<R>(CompiledQuery.raw(text, [...params]));
    return [...result.rows];
  };

  const planOf = async (text: string, params: readonly unknown[]): Promise<PlanNode[]> => {
    const [row] = await run<{ "QUERY PLAN": unknown }>(`explain (format json) ${text}`, params);
    const raw = row?.["QUERY PLAN"];
    const parsed = (typeof raw === "string" ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
    return nodesOf(parsed[0]!.Plan);
  };

  const updates = (): PendingUpdate[] =>
    ids.map((id) => ({
      id,
      status: "completed",
      output_keys: ["k"],
      error: null,
      finished_at: new Date().toISOString(),
      invocations: null,
      attempt: 2,
    }));

  beforeAll(async () => {
    target = await open();
    await run(FILL_SQL);
    // Vacuum, as the PGlite writer's housekeeping and PostgreSQL's autovacuum do, so the planner
    // knows the table's size.
    await run("vacuum analyze lineage");
    const rows = await run<{ id: string }>(`select id from lineage order by md5(id::text) limit ${BATCH}`);
    ids = rows.map((r) => r.id);
  }, 120_000);

  afterAll(async () => {
    await target?.cleanup();
  });

  it("probes the primary key once per update: no hash or merge join, no sequential scan", async () => {
    const s = updateRowsStatement(updates());
    const nodes = await planOf(s.text, s.params);
    const types = nodes.map((n) => n["Node Type"]);
    expect(types).toContain("Nested Loop");
    expect(types).not.toContain("Hash Join");
    expect(types).not.toContain("Merge Join");
    expect(nodes.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "lineage")).toEqual(
      [],
    );
    expect(nodes.map((n) => n["Index Name"])).toContain("lineage_pkey");
    // About one row per probe: an estimate of thousands (as a pair of range conditions gave) makes
    // PostgreSQL compile every batch with JIT, which cost more than the hash join it replaced.
    const join = nodes.find((n) => n["Node Type"] === "Nested Loop");
    expect(join?.["Plan Rows"]).toBeLessThanOrEqual(BATCH * 2);
  });

  it("the same batch joined on plain equality would hash the whole table (the case this guards)", async () => {
    const s = updateRowsStatement(updates());
    const plain = s.text.replace("where l.id = any(array[u.id])", "where l.id = u.id");
    expect(plain).not.toBe(s.text);
    const types = (await planOf(plain, s.params)).map((n) => n["Node Type"]);
    expect(types).toContain("Hash Join");
  });

  it("applies every update of the batch, and only those", async () => {
    const s = updateRowsStatement(updates());
    await target!.handles.writer.execute(s.text, s.params);
    const [counts] = await run<{ done: number; open: number }>(
      `select count(*) filter (where status = 'completed' and attempt = 2 and output_keys = '["k"]'::jsonb)::int as done,
        count(*) filter (where status = 'pending' and attempt = 1)::int as open from lineage`,
    );
    expect(counts).toEqual({ done: BATCH, open: 40_000 - BATCH });
  });
});
