import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openMemoryLineageDatabase } from "@factflow/lineage";
import type {
  AdapterDefinition,
  ExecutionStoreProtocol,
  JsonValue,
  LineageRow,
  Logger,
  QueueProtocol,
} from "@factflow/protocols";
import { afterEach, describe, expect, it } from "vitest";
import { uuidv7 } from "../src/ids.js";
import { createEngine, type Engine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage, waitFor } from "./harness.js";

// Cluster mode in one process: three engines ("servers") on one broker and one lineage store, each
// with its own ClusterNode, as `factflow serve` wires them (docs/deployment.md). tests/cluster runs
// the same with real processes, RabbitMQ, Artemis and PostgreSQL.

/** A ClusterStore over the memory execution store; leases are not exercised here. */
function memoryClusterStore(executions: ExecutionStoreProtocol) {
  return {
    heartbeatNode: async () => {},
    removeNode: async () => {},
    claimExpiredNodes: async () => [] as string[],
    adoptExecutions: async () => [] as string[],
    setExecutionOwner: async () => {},
    runningExecutionIds: async () =>
      (await executions.listExecutions({ status: "running", limit: 1000 })).items.map((e) => e.id),
  };
}

/** Each `onExecutionEnded` of every engine: where, what, how, and whether that server owned it. */
const ends: { server: string; id: string; end: string; owner: boolean }[] = [];
const recordEnds = (server: string) => ({
  onExecutionEnded: (record: { id: string }, end: string, context: { owner: boolean }) => {
    ends.push({ server, id: record.id, end, owner: context.owner });
  },
});

/** Which server's sink handled which item. */
const sunk: { server: string; item: JsonValue }[] = [];
/** Closed: the sinks wait (of server `only` alone, when set), holding their deliveries. */
const gate: { open: boolean; only?: string } = { open: true };

function sinkOf(server: string): AdapterDefinition {
  return {
    type: "cluster-sink",
    description: "records the item and the server that handled it",
    create: () => ({
      type: "cluster-sink",
      async process(ctx) {
        while (!gate.open && (gate.only === undefined || gate.only === server)) {
          if (ctx.signal.aborted) throw ctx.signal.reason;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        sunk.push({ server, item: (ctx.message as { item: JsonValue }).item });
        await new Promise((resolve) => setTimeout(resolve, 2));
        return { data: null };
      },
    }),
  };
}

const yaml = `
name: cluster
init: { route: split, message: { items: [] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: 2, prefetch: 2 }
    adapters: [{ type: cluster-sink }]
`;

let engines: Engine[] = [];
afterEach(async () => {
  for (const engine of engines) await engine.shutdown({ cancel: true });
  engines = [];
  sunk.length = 0;
  ends.length = 0;
  gate.open = true;
  delete gate.only;
});

async function cluster(size: number) {
  const queue = createEmbeddedProvider({ mode: "memory" });
  await queue.connect();
  const db = openMemoryLineageDatabase();
  for (let i = 0; i < size; i++) {
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: [...builtins, sinkOf(`s${i}`)],
      maxConcurrent: 3,
      hooks: recordEnds(`s${i}`),
      cluster: { nodeId: `s${i}`, store: memoryClusterStore(db.executions), pollMs: 30 },
    });
    await engine.cluster?.start();
    engines.push(engine);
  }
  const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
  return { db, config };
}

/** The terminal events `engine` reported for `id`. */
function terminals(engine: Engine, id: string): string[] {
  const types: string[] = [];
  engine.service.subscribe(id, (event) => {
    if (["completed", "failed", "cancelled"].includes(event.type)) types.push(event.type);
  })();
  return types;
}

describe("cluster mode: several engines on one broker and one store", () => {
  it("shares every execution's work; each completes once and every server reports it", async () => {
    const { db, config } = await cluster(3);
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const items = Array.from({ length: 40 }, (_, n) => `e${i}:${n}`);
      const record = await engines[i % 3]!.service.create({ config, input: { items } });
      ids.push(record.id);
    }
    for (const id of ids) {
      await waitFor(
        async () => (await db.executions.getExecution(id))?.status !== "running",
        `end of ${id}`,
        30_000,
      );
      expect((await db.executions.getExecution(id))?.status).toBe("completed");
    }
    // Every server ran (or joined) every execution and reported exactly one terminal event.
    for (const engine of engines) {
      for (const id of ids) {
        await waitFor(() => terminals(engine, id).length > 0, `terminal event of ${id}`, 60_000);
        expect(terminals(engine, id)).toEqual(["completed"]);
      }
    }
    const items = sunk.map((s) => s.item);
    expect(items).toHaveLength(240);
    expect(new Set(items).size).toBe(240);
    // Joined executions do not count against a server's max_concurrent (3, with 6 running).
    expect(new Set(sunk.map((s) => s.server)).size).toBeGreaterThan(1);
  });

  it("tells only the server that created an execution that it owns it when it ends (the one that cleans its queues)", async () => {
    const { config } = await cluster(3);
    const created = new Map<string, string>();
    // The sinks hold their deliveries until every server runs every execution: none ends sooner.
    gate.open = false;
    for (let i = 0; i < 3; i++) {
      const items = Array.from({ length: 10 }, (_, n) => `o${i}:${n}`);
      const record = await engines[i]!.service.create({ config, input: { items } });
      created.set(record.id, `s${i}`);
    }
    for (const id of created.keys())
      await waitFor(() => engines.every((e) => e.manager.get(id) !== undefined), "every server joined");
    gate.open = true;
    await waitFor(() => ends.length === 9, "every server's end of every execution", 60_000);
    for (const [id, creator] of created) {
      const of = ends.filter((e) => e.id === id);
      expect(of.map((e) => e.end)).toEqual(["completed", "completed", "completed"]);
      expect(of.filter((e) => e.owner).map((e) => e.server)).toEqual([creator]);
    }
  });

  it("a cancel on one server stops the execution on every server", async () => {
    const { db, config } = await cluster(3);
    gate.open = false;
    const record = await engines[0]!.service.create({
      config,
      input: { items: Array.from({ length: 20 }, (_, n) => n) },
    });
    await waitFor(() => engines.every((e) => e.manager.get(record.id) !== undefined), "every server joined");
    expect(await engines[2]!.service.cancel(record.id)).toBe("cancelled");
    for (const engine of engines) {
      await waitFor(() => engine.manager.get(record.id) === undefined, "stopped everywhere", 60_000);
      expect(terminals(engine, record.id)).toEqual(["cancelled"]);
    }
    expect((await db.executions.getExecution(record.id))?.status).toBe("cancelled");
  });
});

describe("cluster takeover: the broker's part", () => {
  it("asks the broker to hand each dead server's deliveries over once, and survives its failure", async () => {
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const db = openMemoryLineageDatabase();
    const expired = ["dead-1", "dead-2"];
    const claimed: string[] = [];
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: builtins,
      cluster: {
        nodeId: "live",
        store: { ...memoryClusterStore(db.executions), claimExpiredNodes: async () => expired.splice(0) },
        pollMs: 30,
        claimDeadNode: async (node) => {
          claimed.push(node);
          if (node === "dead-1") throw new Error("broker unreachable");
        },
      },
    });
    engines.push(engine);
    await engine.cluster?.start();
    await waitFor(() => claimed.length === 2, "both dead servers claimed");
    expect(claimed).toEqual(["dead-1", "dead-2"]);
  });
});

describe("cluster takeover: queue clean-up", () => {
  it("the taker owns (and cleans) what a dead owner ran, and cleans what ended while it was dead", async () => {
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const db = openMemoryLineageDatabase();
    const owners = new Map<string, string>();
    const expired: string[] = [];
    const cleaned: string[] = [];
    const store = {
      ...memoryClusterStore(db.executions),
      claimExpiredNodes: async () => expired.splice(0),
      adoptExecutions: async (from: string, to: string) => {
        const running = await memoryClusterStore(db.executions).runningExecutionIds();
        const adopted = running.filter((id) => owners.get(id) === from);
        for (const id of adopted) owners.set(id, to);
        return adopted;
      },
      endedExecutionsOwnedBy: async (node: string) => {
        const ended = [...owners].filter(([, owner]) => owner === node).map(([id]) => id);
        const rows = await Promise.all(ended.map((id) => db.executions.getExecution(id)));
        return rows.filter((r) => r !== undefined && r.status !== "running").map((r) => r!.id);
      },
    };
    for (let i = 0; i < 2; i++) {
      const engine = createEngine({
        queue,
        lineage: db.lineage,
        executions: db.executions,
        storage: memoryStorage(),
        adapters: [...builtins, sinkOf(`s${i}`)],
        hooks: recordEnds(`s${i}`),
        cluster: {
          nodeId: `s${i}`,
          store,
          pollMs: 30,
          cleanUpQueues: (record) => {
            cleaned.push(`s${i}:${record.id}`);
          },
        },
      });
      await engine.cluster?.start();
      engines.push(engine);
    }
    const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
    // Ended while its owner s1 was dead: only the taker can clean its queues.
    const ended = await db.executions.createExecution({
      id: uuidv7(),
      configName: config.name,
      configVersion: null,
      configSnapshot: config,
      input: null,
    });
    await db.executions.finishExecution(ended.id, "completed");
    owners.set(ended.id, "s1");
    // Running, created by s1, whose sinks hold their deliveries until it stops.
    gate.open = false;
    gate.only = "s1";
    const record = await engines[1]!.service.create({ config, input: { items: itemsOf("q", 8) } });
    owners.set(record.id, "s1");
    await waitFor(() => engines[0]!.manager.get(record.id) !== undefined, "s0 joined");
    // Nothing completes before the takeover: s0's sinks hold theirs too.
    delete gate.only;
    await engines[1]!.shutdown();
    expired.push("s1");
    await waitFor(() => cleaned.length > 0, "the taker to clean the ended execution's queues");
    expect(cleaned).toEqual([`s0:${ended.id}`]);
    expect(owners.get(record.id)).toBe("s0");
    gate.open = true;
    await expectCompleted(db, record.id);
    await waitFor(() => ends.some((e) => e.server === "s0" && e.id === record.id), "s0's end");
    expect(ends.filter((e) => e.id === record.id)).toEqual([
      { server: "s1", id: record.id, end: "stopped", owner: true },
      { server: "s0", id: record.id, end: "completed", owner: true },
    ]);
    expect(new Set(sunkOf("q"))).toEqual(new Set(itemsOf("q", 8)));
  });
});

/** Log lines of one engine, each with the time it was written; `on` sees each as it is written. */
function recordingLogger(on?: (message: string) => void) {
  const lines: { level: string; message: string; fields: Record<string, unknown>; at: number }[] = [];
  const logger: Logger = {
    debug: (message, fields = {}) => write("debug", message, fields),
    info: (message, fields = {}) => write("info", message, fields),
    warn: (message, fields = {}) => write("warn", message, fields),
    error: (message, fields = {}) => write("error", message, fields),
    child: () => logger,
  };
  function write(level: string, message: string, fields: Record<string, unknown>): void {
    lines.push({ level, message, fields, at: Date.now() });
    on?.(message);
  }
  const find = (part: string) => lines.filter((l) => l.message.includes(part));
  return { logger, lines, find };
}

/** Sink deliveries of the execution that the current engines handle. */
function sinkInFlight(executionId: string): number {
  let n = 0;
  for (const engine of engines)
    n +=
      engine.manager
        .get(executionId)
        ?.progress()
        .routes.find((r) => r.route === "sink")?.inFlight ?? 0;
  return n;
}

const QUIET = "takeover: the broker holds nothing for the execution";
const REPUBLISH = "messages a dead server left open";

/**
 * A taker (`s0`) and another live server (`s1`) on one embedded broker and one lineage store. The
 * taker's store hands it the dead server `dead` once `killed()` was called, and counts its polls.
 */
async function takeoverCluster(options: {
  settleMs?: number;
  queue?: (queue: QueueProtocol) => QueueProtocol;
  onLog?: (message: string) => void;
}) {
  const broker = createEmbeddedProvider({ mode: "memory" });
  await broker.connect();
  const queue = options.queue?.(broker) ?? broker;
  const db = openMemoryLineageDatabase();
  const expired: string[] = [];
  const silent: string[] = [];
  const polls = { sinceTakeover: 0, tookOver: false, all: 0 };
  const log = recordingLogger(options.onLog);
  const base = memoryClusterStore(db.executions);
  const takerStore = {
    ...base,
    claimExpiredNodes: async () => {
      const dead = expired.splice(0);
      if (dead.length > 0) polls.tookOver = true;
      return dead;
    },
    runningExecutionIds: async () => {
      polls.all++;
      if (polls.tookOver) polls.sinceTakeover++;
      return base.runningExecutionIds();
    },
    silentNodes: async () => [...silent],
  };
  for (const [i, store] of [takerStore, base].entries()) {
    const engine = createEngine({
      queue,
      lineage: db.lineage,
      executions: db.executions,
      storage: memoryStorage(),
      adapters: [...builtins, sinkOf(`s${i}`)],
      ...(i === 0 ? { logger: log.logger } : {}),
      cluster: {
        nodeId: `s${i}`,
        store,
        pollMs: 30,
        ...(options.settleMs === undefined ? {} : { settleMs: options.settleMs }),
      },
    });
    await engine.cluster?.start();
    engines.push(engine);
  }
  const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
  return {
    db,
    config,
    log,
    polls,
    /** The dead server misses its heartbeats; its lease still runs. */
    silenced: () => silent.push("dead"),
    /** Its lease expired: the taker claims it at its next poll. */
    killed: () => {
      silent.length = 0;
      expired.push("dead");
    },
  };
}

/** Waits until the execution is no longer running, and expects it completed. */
async function expectCompleted(
  db: { executions: Pick<ExecutionStoreProtocol, "getExecution"> },
  executionId: string,
): Promise<void> {
  await waitFor(
    async () => (await db.executions.getExecution(executionId))?.status !== "running",
    "the execution ended",
    30_000,
  );
  expect((await db.executions.getExecution(executionId))?.status).toBe("completed");
}

/**
 * What a server killed after acknowledging a sink delivery and before its closing write committed
 * leaves: the message row open (with its payload) and its invocation's adapter row open, and nothing
 * on the broker.
 */
function leftOpen(lineage: { record(row: LineageRow): void }, executionId: string, item: string): string {
  const messageId = uuidv7();
  const common = { executionId, route: "sink", messageId, correlationId: messageId, attempt: 1 };
  const startedAt = new Date().toISOString();
  lineage.record({
    ...common,
    id: messageId,
    kind: "message",
    status: "pending",
    startedAt,
    payload: { item },
  });
  lineage.record({
    ...common,
    id: uuidv7(),
    kind: "adapter",
    adapter: "cluster-sink",
    adapterIndex: 0,
    status: "processing",
    startedAt,
  });
  return messageId;
}

/** Items of one test: a tag of their own, so a handler an earlier test left running never counts. */
const itemsOf = (tag: string, n: number) => Array.from({ length: n }, (_, i) => `${tag}-${i}`);
const sunkOf = (tag: string) =>
  sunk.map((s) => s.item).filter((i): i is string => typeof i === "string" && i.startsWith(`${tag}-`));

describe("cluster takeover: re-publishing what a dead server left open", () => {
  it("waits while the broker holds a delivery of another live server, then re-publishes once the rows stay the same for the settle time", async () => {
    const settleMs = 300;
    const { db, config, log, polls, killed } = await takeoverCluster({ settleMs });
    gate.open = false;
    const record = await engines[0]!.service.create({ config, input: { items: itemsOf("t1", 20) } });
    // s1's sink deliveries: at the gate, or waiting there for a slot.
    const heldByS1 = () =>
      engines[1]!.manager
        .get(record.id)
        ?.progress()
        .routes.find((r) => r.route === "sink")?.inFlight ?? 0;
    await waitFor(() => heldByS1() > 0, "s1 holds a sink delivery");
    // From here only s1 waits, holding what it took.
    gate.only = "s1";
    leftOpen(db.lineage, record.id, "t1-ghost");
    killed();
    // Everything but what s1 holds is sunk, so the taker itself is idle; three polls later the
    // broker still counts s1's deliveries in flight, and nothing was re-published.
    await waitFor(() => sunkOf("t1").length + heldByS1() === 20, "the taker sank the rest");
    const from = polls.sinceTakeover;
    await waitFor(() => polls.sinceTakeover >= from + 3, "three more polls");
    expect(heldByS1()).toBeGreaterThan(0);
    expect(log.find(QUIET)).toHaveLength(0);
    expect(log.find(REPUBLISH)).toHaveLength(0);

    gate.open = true;
    await expectCompleted(db, record.id);
    const items = sunkOf("t1");
    expect(items.filter((i) => i === "t1-ghost")).toHaveLength(1);
    expect(new Set(items)).toEqual(new Set([...itemsOf("t1", 20), "t1-ghost"]));
    expect(items).toHaveLength(21);
    const quiet = log.find(QUIET);
    const republish = log.find(REPUBLISH);
    expect(republish.map((l) => l.message)).toEqual([`re-publishing 1 ${REPUBLISH}`]);
    expect(quiet.length).toBeGreaterThanOrEqual(1);
    // Measured from the settle time's own start: the quiet line is logged a moment after it.
    expect(republish[0]!.at - Date.parse(String(quiet.at(-1)!.fields?.since))).toBeGreaterThanOrEqual(
      settleMs,
    );
    // The dead invocation's row was closed before the re-publish.
    const adapters = await db.lineage.rows(record.id, { kind: "adapter", status: "abandoned" });
    expect(adapters.items).toHaveLength(1);
  });

  it("starts the settle time again when an open row changes", async () => {
    const settleMs = 300;
    const ctx: { lineage?: { record(row: LineageRow): void }; executionId?: string; second?: string } = {};
    const { db, config, log, killed } = await takeoverCluster({
      settleMs,
      // A row changes during the first settle time: recorded while the first quiet look is logged.
      onLog: (message) => {
        if (message.startsWith(QUIET) && ctx.second === undefined && ctx.lineage && ctx.executionId)
          ctx.second = leftOpen(ctx.lineage, ctx.executionId, "t2-ghost-2");
      },
    });
    gate.open = false;
    const record = await engines[0]!.service.create({ config, input: { items: itemsOf("t2", 4) } });
    await waitFor(() => sinkInFlight(record.id) > 0, "a sink delivery started");
    leftOpen(db.lineage, record.id, "t2-ghost-1");
    Object.assign(ctx, { lineage: db.lineage, executionId: record.id });
    gate.open = true;
    killed();
    await expectCompleted(db, record.id);
    const quiet = log.find(QUIET);
    const republish = log.find(REPUBLISH);
    expect(quiet).toHaveLength(2);
    expect(republish.map((l) => l.message)).toEqual([`re-publishing 2 ${REPUBLISH}`]);
    // Measured from the settle time's own start: the quiet line is logged a moment after it.
    const since = Date.parse(String(quiet[1]!.fields?.since));
    expect(republish[0]!.at - since).toBeGreaterThanOrEqual(settleMs);
    const items = sunkOf("t2");
    expect(items.filter((i) => i.includes("ghost")).sort()).toEqual(["t2-ghost-1", "t2-ghost-2"]);
    expect(items).toHaveLength(6);
  });

  it("counts the quiet seen while a server is silent towards the settle time, and closes or re-publishes nothing before its lease is claimed", async () => {
    const settleMs = 300;
    const { db, config, log, polls, silenced, killed } = await takeoverCluster({ settleMs });
    gate.open = false;
    const record = await engines[0]!.service.create({ config, input: { items: itemsOf("t3", 4) } });
    await waitFor(() => sinkInFlight(record.id) > 0, "a sink delivery started");
    leftOpen(db.lineage, record.id, "t3-ghost");
    // And an invocation that died beside a message another server settled: closed at the claim.
    const settled = leftOpen(db.lineage, record.id, "t3-settled elsewhere");
    db.lineage.update(settled, { status: "completed", finishedAt: new Date().toISOString() });
    gate.open = true;
    await waitFor(() => sunkOf("t3").length === 4, "the four items sunk");
    silenced();
    const [quiet] = await waitFor(() => {
      const found = log.find(QUIET);
      return found.length > 0 ? found : undefined;
    }, "a quiet look while the server is silent");
    // The settle time has passed and two more polls looked: still nothing closed or re-published.
    await waitFor(() => Date.now() - quiet!.at >= settleMs, "the settle time");
    const from = polls.all;
    await waitFor(() => polls.all >= from + 2, "two more polls");
    expect(log.find(REPUBLISH)).toHaveLength(0);
    expect((await db.lineage.rows(record.id, { kind: "adapter", status: "abandoned" })).items).toHaveLength(
      0,
    );

    killed();
    await expectCompleted(db, record.id);
    // Re-published at the first look after the claim, on the quiet seen before it: closing the dead
    // invocation at the claim did not start the settle time again.
    expect(log.find("closed 1 adapter rows a dead server left beside settled messages")).toHaveLength(1);
    expect(log.find(QUIET)).toHaveLength(1);
    expect(log.find(REPUBLISH).map((l) => l.message)).toEqual([`re-publishing 1 ${REPUBLISH}`]);
    expect(sunkOf("t3").filter((i) => i === "t3-ghost")).toHaveLength(1);
  });

  it("settles for 2 s by default where the stats are broker-wide, else for the longer of 5 s and twice the longest retry delay", async () => {
    for (const brokerWideStats of [true, false]) {
      const { db, config, log, killed } = await takeoverCluster({
        queue: (queue) =>
          new Proxy(queue, {
            get: (target, key) =>
              key === "capabilities"
                ? { ...target.capabilities, brokerWideStats }
                : Reflect.get(target, key, target),
          }),
      });
      gate.open = false;
      const record = await engines[0]!.service.create({ config, input: { items: itemsOf("t4", 2) } });
      await waitFor(() => sinkInFlight(record.id) > 0, "a sink delivery started");
      leftOpen(db.lineage, record.id, "t4-ghost");
      gate.open = true;
      killed();
      const [quiet] = await waitFor(() => {
        const found = log.find(QUIET);
        return found.length > 0 ? found : undefined;
      }, "the first quiet look");
      const maxDelay = record.configSnapshot.settings.retry.max_delay_ms;
      expect(quiet!.fields.settleMs).toBe(brokerWideStats ? 2000 : Math.max(5000, 2 * maxDelay));
      for (const engine of engines) await engine.shutdown({ cancel: true });
      engines = [];
    }
  });
});

describe("cluster mode: completion polls per execution, not per server", () => {
  it("a server holding no work of an execution stops polling it; one live server claims an execution whose owner left", async () => {
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const db = openMemoryLineageDatabase();
    const nodes = new Set(["s0", "s1"]);
    const owners = new Map<string, string>();
    let ticks = 0;
    const store = {
      ...memoryClusterStore(db.executions),
      runningExecutionOwners: async () => {
        ticks++;
        const running = (await db.executions.listExecutions({ status: "running", limit: 1000 })).items;
        return running.map((e) => {
          const owner = owners.get(e.id) ?? null;
          return { id: e.id, owner, ownerPresent: owner !== null && nodes.has(owner) };
        });
      },
      claimExecution: async (executionId: string, nodeId: string) => {
        const owner = owners.get(executionId);
        if (owner !== undefined && nodes.has(owner)) return { claimed: false };
        owners.set(executionId, nodeId);
        return { claimed: true };
      },
    };
    // Each server's completion checks, counted apart.
    const checks = [0, 0];
    for (let i = 0; i < 2; i++) {
      const lineage = new Proxy(db.lineage, {
        get(target, key) {
          if (key === "countOpen")
            return (id: string) => {
              checks[i] = (checks[i] ?? 0) + 1;
              return target.countOpen(id);
            };
          const value = Reflect.get(target, key);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
      const engine = createEngine({
        queue,
        lineage,
        executions: db.executions,
        storage: memoryStorage(),
        adapters: [...builtins, sinkOf(`s${i}`)],
        cluster: { nodeId: `s${i}`, store, pollMs: 30 },
      });
      await engine.cluster?.start();
      engines.push(engine);
    }
    const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
    // s0's sinks hold their deliveries; s1 runs what it gets, then holds no work of the execution.
    gate.open = false;
    gate.only = "s0";
    const items = Array.from({ length: 12 }, (_, n) => n);
    const record = await engines[0]!.service.create({ config, input: { items } });
    owners.set(record.id, "s0");
    await waitFor(() => sunk.length === 10, "s1 to sink every item s0 does not hold", 30_000);
    // s1's last check found only s0's rows open: over the next 40 discovery passes (at least
    // 1.2 s, in which a backing-off poll would have asked three times or more) it asks nothing.
    await waitFor(async () => checks[1] === (await settledChecks(1)), "s1's checks to stop", 30_000);
    const before = checks[1];
    const tickAt = ticks;
    await waitFor(() => ticks >= tickAt + 80, "40 discovery passes of each server", 30_000);
    expect(checks[1]).toBe(before);

    // s0 leaves cleanly (gives its lease back) without ending its execution: s1 claims it and polls.
    nodes.delete("s0");
    await waitFor(() => owners.get(record.id) === "s1", "s1 to claim the execution", 30_000);
    await waitFor(() => (checks[1] ?? 0) > (before ?? 0), "s1 to poll the execution it owns", 30_000);
    gate.open = true;
    await waitFor(
      async () => (await db.executions.getExecution(record.id))?.status === "completed",
      "the execution to complete",
      30_000,
    );
    expect(new Set(sunk.map((s) => s.item)).size).toBe(12);

    /** `checks[i]` once it has stayed the same over 10 discovery passes of both servers. */
    async function settledChecks(i: number): Promise<number> {
      const seen = checks[i] ?? 0;
      const from = ticks;
      await waitFor(() => ticks >= from + 20 || checks[i] !== seen, "10 discovery passes", 30_000);
      return seen;
    }
  });
});
