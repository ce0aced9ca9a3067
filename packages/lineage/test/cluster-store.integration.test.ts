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
