import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecutionStore } from "../src/execution-store.js";
import { openLineageDatabase } from "../src/open-lineage-database.js";
import { uuidv7 } from "../src/uuidv7.js";
import { createTestDatabase, skipWithoutPostgres } from "./pg-test-database.js";

// Cluster mode's database side (docs/deployment.md): leases, takeover claims, ownership and the
// cluster-wide cap on running executions.

const skip = await skipWithoutPostgres();
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

describe.skipIf(skip)("cluster store on PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Awaited<ReturnType<typeof openLineageDatabase>>;
  let store: ExecutionStore;

  beforeAll(async () => {
    database = await createTestDatabase("factflow_cluster");
    db = await openLineageDatabase({ databaseUrl: database.url });
    store = db.executions as ExecutionStore;
  });
  afterAll(async () => {
    await db?.close();
    await database?.drop();
  });

  const newExecution = () => ({
    id: uuidv7(),
    configName: "c",
    configVersion: null,
    configSnapshot: { name: "c" } as never,
    input: null,
  });

  it("hands an expired lease to exactly one claimer, with the executions it owned", async () => {
    const cluster = store.cluster();
    await cluster.heartbeatNode("a", 60_000);
    await cluster.heartbeatNode("b", 1000);
    const owned = await store.createExecution(newExecution());
    await cluster.setExecutionOwner(owned.id, "b");
    expect((await cluster.liveNodes()).map((n) => n.nodeId)).toEqual(["a", "b"]);
    await sleep(1200);
    const claims = await Promise.all([cluster.claimExpiredNodes(), cluster.claimExpiredNodes()]);
    expect(claims.flat()).toEqual(["b"]);
    expect(await cluster.adoptExecutions("b", "a")).toEqual([owned.id]);
    expect(await cluster.liveNodes()).toEqual([expect.objectContaining({ nodeId: "a", owned: 1 })]);
    expect(await cluster.runningExecutionIds()).toContain(owned.id);
    await store.finishExecution(owned.id, "completed");
    expect(await cluster.runningExecutionIds()).not.toContain(owned.id);
    await cluster.removeNode("a");
    expect(await cluster.liveNodes()).toEqual([]);
  });

  it("lists the running executions with their owner and whether the owner still has a lease row", async () => {
    const cluster = store.cluster();
    await cluster.heartbeatNode("present", 60_000);
    const held = await store.createExecution({ ...newExecution(), ownerNode: "present" });
    const left = await store.createExecution({ ...newExecution(), ownerNode: "gone" });
    const ownerless = await store.createExecution(newExecution());
    const owners = (await cluster.runningExecutionOwners()).filter((o) =>
      [held.id, left.id, ownerless.id].includes(o.id),
    );
    expect(owners).toEqual([
      { id: held.id, owner: "present", ownerPresent: true },
      { id: left.id, owner: "gone", ownerPresent: false },
      { id: ownerless.id, owner: null, ownerPresent: false },
    ]);
    for (const e of [held, left, ownerless]) await store.finishExecution(e.id, "completed");
    expect((await cluster.runningExecutionOwners()).map((o) => o.id)).not.toContain(held.id);
    await cluster.removeNode("present");
  });

  it("names the servers whose lease runs but whose heartbeat is older than asked", async () => {
    const cluster = store.cluster();
    await cluster.heartbeatNode("beating", 60_000);
    // now() of a later statement is past every earlier heartbeat.
    expect(await cluster.silentNodes(0)).toContain("beating");
    expect(await cluster.silentNodes(60_000)).not.toContain("beating");
    await cluster.removeNode("beating");
    expect(await cluster.silentNodes(0)).not.toContain("beating");
  });

  it("lets a process claim a running execution only when its owner's lease is not live, once", async () => {
    const cluster = store.cluster();
    await cluster.heartbeatNode("live", 60_000);
    await cluster.heartbeatNode("dying", 500);
    const held = await store.createExecution({ ...newExecution(), ownerNode: "live" });
    const orphaned = await store.createExecution({ ...newExecution(), ownerNode: "dying" });
    const ownerless = await store.createExecution(newExecution());
    expect(await cluster.claimExecution(held.id, "other")).toEqual({ claimed: false, owner: "live" });
    expect(await cluster.claimExecution(held.id, "live")).toEqual({ claimed: true, owner: "live" });
    await sleep(700);
    // Claimers hold leases of their own, as every process that runs executions does.
    await cluster.heartbeatNode("x", 60_000);
    await cluster.heartbeatNode("y", 60_000);
    const race = await Promise.all([
      cluster.claimExecution(orphaned.id, "x"),
      cluster.claimExecution(orphaned.id, "y"),
    ]);
    expect(race.filter((r) => r.claimed)).toHaveLength(1);
    const winner = race.find((r) => r.claimed)?.owner;
    expect(await cluster.claimExecution(orphaned.id, "z")).toEqual({ claimed: false, owner: winner });
    expect(await cluster.claimExecution(ownerless.id, "z")).toEqual({ claimed: true, owner: "z" });
    await store.finishExecution(ownerless.id, "completed");
    expect(await cluster.claimExecution(ownerless.id, "x")).toEqual({ claimed: false, owner: null });

    await cluster.heartbeatNode("dd-1/host-1-a", 60_000);
    await cluster.heartbeatNode("dd-10/host-2-b", 60_000);
    await cluster.heartbeatNode("dd_1/host-3-c", 60_000);
    expect(await cluster.nodeIdsStartingWith("dd-1/")).toEqual(["dd-1/host-1-a"]);
    expect(await cluster.nodeIdsStartingWith("dd_1/")).toEqual(["dd_1/host-3-c"]);
    for (const node of ["live", "dying", "x", "y", "z", "dd-1/host-1-a", "dd-10/host-2-b", "dd_1/host-3-c"])
      await cluster.removeNode(node);
    for (const id of [held.id, orphaned.id]) await store.finishExecution(id, "cancelled");
  });

  it("caps running executions across servers without overshooting", async () => {
    const before = (await store.cluster().runningExecutionIds()).length;
    store.limitRunning(before + 3);
    try {
      const results = await Promise.allSettled(
        Array.from({ length: 8 }, () => store.createExecution(newExecution())),
      );
      const created = results.filter((r) => r.status === "fulfilled");
      const refused = results.filter((r) => r.status === "rejected") as PromiseRejectedResult[];
      expect(created).toHaveLength(3);
      expect(refused).toHaveLength(5);
      expect((refused[0] as PromiseRejectedResult).reason.code).toBe("too_many_executions");
    } finally {
      store.limitRunning(undefined);
    }
  });
});
