import { adapters as builtins } from "@factflow/adapters";
import { createEngine, type Engine, loadPipelineConfig } from "@factflow/engine";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { ArtefactSidecar, LineageRow, QueueProtocol, StorageProtocol } from "@factflow/protocols";
import { healing, modelAdapters, sunk } from "./model-adapters.js";
import type { DeadReason, RouteOutcome } from "./oracle.js";
import type { Shape } from "./shape.js";
import { toPipelineConfig } from "./to-config.js";

/** The model's adapters write no artefacts; a storage that holds nothing is enough. */
const noStorage: StorageProtocol = {
  put: async (key) =>
    ({ key, contentType: "application/octet-stream", size: 0, sha256: "", createdAt: "" }) as ArtefactSidecar,
  get: async () => undefined,
  head: async () => undefined,
  list: async () => [],
  delete: async () => false,
  describe: () => "none",
};

/** What one execution did, read back from lineage, the sinks and the broker. */
export interface Observed {
  readonly id: string;
  readonly status: string;
  readonly routes: Record<string, RouteOutcome>;
  /** Milliseconds from the last lineage row's end to the execution's end. */
  readonly settleMs: number;
  /** Execution-scoped destinations that still hold messages (not counting expected dead letters). */
  readonly leftovers: string[];
  /** Dead letters the broker holds per route. */
  readonly brokerDead: Record<string, number>;
}

export interface ModelRun {
  readonly engine: Engine;
  readonly queue: QueueProtocol;
  readonly db: LineageDatabase;
  /** Runs `shape`; `during` runs beside the execution once it started (a fault to inject). */
  run(shape: Shape, during?: (executionId: string) => Promise<void>): Promise<Observed>;
  /** Replays these dead-lettered keys of `route` with every rule passing, as a new execution. */
  replayDead(shape: Shape, parent: Observed, route: string, keys: readonly string[]): Promise<Observed>;
  close(): Promise<void>;
}

function emptyOutcome(): RouteOutcome {
  return {
    arrived: 0,
    skipped: 0,
    completed: 0,
    dead: { rejected: 0, exhausted: 0, incomplete: 0 },
    deadKeys: [],
    retries: 0,
    sunk: [],
  };
}

/** An engine on `queue` with an in-memory lineage store, running shapes one at a time. */
export async function openModelRun(
  queue: QueueProtocol,
  options: { lineage?: LineageDatabase } = {},
): Promise<ModelRun> {
  const db = options.lineage ?? (await openLineageDatabase({ memory: true }));
  await queue.connect();
  const engine = createEngine({
    queue,
    lineage: db.lineage,
    executions: db.executions,
    storage: noStorage,
    adapters: [...builtins, ...modelAdapters],
    progressIntervalMs: 200,
  });

  async function observe(shape: Shape, id: string): Promise<Observed> {
    const status = await engine.service.waitForEnd(id, 600_000);
    const ended = Date.now();
    await db.lineage.flush();
    const page = { items: await allRows(db, id) };
    const routes: Record<string, RouteOutcome> = {};
    for (const r of shape.routes) routes[r.name] = emptyOutcome();
    const messages = page.items.filter((row: LineageRow) => row.kind === "message");
    const keyOf = (row: LineageRow): string => ((row.payload ?? {}) as { k?: string }).k ?? "?";
    let lastEnd = 0;
    for (const row of page.items) {
      const at = Date.parse(row.finishedAt ?? row.startedAt);
      if (at > lastEnd) lastEnd = at;
    }
    for (const row of messages) {
      const o = routes[row.route] ?? emptyOutcome();
      routes[row.route] = o;
      o.arrived++;
      o.retries += Math.max(0, row.attempt - 1);
      if (row.status === "skipped") o.skipped++;
      else if (row.status === "completed") o.completed++;
      else if (row.status === "failed") {
        o.dead[deadReasonOf(row)]++;
        o.deadKeys.push(keyOf(row));
      }
    }
    const sinks = sunk.get(id) ?? new Map<string, string[]>();
    for (const [route, keys] of sinks) {
      const o = routes[route] ?? emptyOutcome();
      routes[route] = o;
      o.sunk = [...keys].sort();
    }
    for (const o of Object.values(routes)) o.deadKeys.sort();
    const { leftovers, brokerDead } = await brokerState(queue, id, shape);
    return { id, status, routes, settleMs: lastEnd === 0 ? 0 : ended - lastEnd, leftovers, brokerDead };
  }

  return {
    engine,
    queue,
    db,
    async run(shape, during) {
      const config = await loadPipelineConfig(JSON.stringify(toPipelineConfig(shape)), {
        registry: engine.registry,
      });
      const record = await engine.service.create({ config });
      // Settled here so a failing fault cannot become an unhandled rejection while the run goes on.
      const fault = during?.(record.id).then(
        () => undefined,
        (error: unknown) => error ?? new Error("the fault failed"),
      );
      const observed = await observe(shape, record.id);
      const error = await fault;
      if (error !== undefined) throw error;
      return observed;
    },
    async replayDead(shape, parent, route, keys) {
      const rows = await allRows(db, parent.id, "message");
      // A key may have reached the route more than once (two paths lead there): replay as many of
      // its dead-lettered rows as `keys` names it.
      const wanted = new Map<string, number>();
      for (const key of keys) wanted.set(key, (wanted.get(key) ?? 0) + 1);
      const ids: string[] = [];
      for (const r of rows) {
        const key = (r.payload as { k?: string } | undefined)?.k ?? "";
        const left = wanted.get(key) ?? 0;
        if (r.route !== route || r.status !== "failed" || left === 0) continue;
        wanted.set(key, left - 1);
        ids.push(r.messageId);
      }
      healing.active = true;
      try {
        const record = await engine.service.replay(parent.id, { fromRoute: route, messageIds: ids });
        return await observe(shape, record.id);
      } finally {
        healing.active = false;
      }
    },
    async close() {
      await engine.shutdown();
      await queue.close();
      if (options.lineage === undefined) await db.close();
    },
  };
}

/** Every lineage row of an execution, page by page (a page holds at most 10,000). */
async function allRows(db: LineageDatabase, executionId: string, kind?: "message"): Promise<LineageRow[]> {
  const rows: LineageRow[] = [];
  for (;;) {
    const page = await db.lineage.rows(executionId, {
      limit: 10_000,
      offset: rows.length,
      ...(kind === undefined ? {} : { kind }),
    });
    rows.push(...page.items);
    if (page.items.length < 10_000) return rows;
  }
}

/**
 * The dead-letter reason a failed message row implies: a non-retryable error was rejected at once; a
 * last attempt that timed out or was abandoned was incomplete; any other retryable error exhausted
 * the budget.
 */
function deadReasonOf(row: LineageRow): DeadReason {
  const error = row.error;
  if (error === undefined) return "exhausted";
  if (!error.retryable) return "rejected";
  if (error.class === "HandlerTimeout" || error.class === "DeliveryAbandoned") return "incomplete";
  return "exhausted";
}

/**
 * What the broker still holds for the execution: messages waiting or in flight (there must be none)
 * and dead letters per route. Its destinations are then deleted, so cases do not pile up queues.
 */
async function brokerState(queue: QueueProtocol, executionId: string, shape: Shape) {
  const leftovers: string[] = [];
  const brokerDead: Record<string, number> = {};
  const destinations = (await queue.admin.listDestinations()).filter((d) =>
    d.destination.includes(executionId),
  );
  for (const d of destinations) {
    const stats = await queue.admin.stats({ destination: d.destination });
    const route = shape.routes.find((r) => d.destination.endsWith(`/${r.queue}`));
    if (route !== undefined) brokerDead[route.name] = (brokerDead[route.name] ?? 0) + stats.dlqDepth;
    if (stats.depth > 0 || stats.inFlight > 0)
      leftovers.push(`${d.destination}: depth ${stats.depth}, in flight ${stats.inFlight}`);
  }
  for (const d of destinations)
    await queue.admin
      .deleteDestination({ destination: d.destination }, { keepDeadLetters: false })
      .catch(() => undefined);
  return { leftovers, brokerDead };
}
