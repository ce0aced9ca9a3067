import type { Logger } from "@factflow/protocols";
import type { Client, Notification } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLUSTER_CHANNEL, ClusterNotifications } from "../src/cluster-notifications.js";
import type { ExecutionStore } from "../src/execution-store.js";
import { openLineageDatabase } from "../src/open-lineage-database.js";
import { uuidv7 } from "../src/uuidv7.js";
import { createTestDatabase, openAdminClient, skipWithoutPostgres } from "./pg-test-database.js";

// Cluster discovery's wake-ups (docs/deployment.md): the stores announce creates, ends, owner
// changes and leases given back on the cluster channel when they commit, and one listening
// connection per server hears them, reconnecting after it is cut.

const skip = await skipWithoutPostgres();

/** The payloads a connection listening on the channel receives, awaited one by one. */
function payloads(client: Client) {
  const received: string[] = [];
  const waiting: ((payload: string) => void)[] = [];
  client.on("notification", (message: Notification) => {
    if (message.channel !== CLUSTER_CHANNEL) return;
    const next = waiting.shift();
    if (next === undefined) received.push(message.payload ?? "");
    else next(message.payload ?? "");
  });
  return {
    next: (): Promise<string> => {
      const payload = received.shift();
      if (payload !== undefined) return Promise.resolve(payload);
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** Calls of a listener's `onChange`, awaited one by one. */
function changes() {
  let count = 0;
  let waiting: { at: number; resolve: () => void }[] = [];
  return {
    onChange: () => {
      count++;
      for (const w of waiting.filter((w) => count >= w.at)) w.resolve();
      waiting = waiting.filter((w) => count < w.at);
    },
    get count() {
      return count;
    },
    /** Resolves once `onChange` was called `n` times in all. */
    reach: (n: number): Promise<void> =>
      count >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ at: n, resolve })),
  };
}

function recordingLogger() {
  const lines: { level: string; message: string }[] = [];
  const logger: Logger = {
    debug: (message) => lines.push({ level: "debug", message }),
    info: (message) => lines.push({ level: "info", message }),
    warn: (message) => lines.push({ level: "warn", message }),
    error: (message) => lines.push({ level: "error", message }),
    child: () => logger,
  };
  return { logger, lines };
}

describe.skipIf(skip)("cluster notifications on PostgreSQL", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let db: Awaited<ReturnType<typeof openLineageDatabase>>;
  let store: ExecutionStore;
  let admin: Client;

  beforeAll(async () => {
    database = await createTestDatabase("factflow_cluster_notify");
    db = await openLineageDatabase({ databaseUrl: database.url });
    store = db.executions as ExecutionStore;
    admin = await openAdminClient(database.url);
  });
  afterAll(async () => {
    await admin?.end();
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

  it("announces creates, ends, owner changes and leases given back when they commit, never a rolled-back create", async () => {
    const listener = await openAdminClient(database.url);
    try {
      await listener.query(`LISTEN ${CLUSTER_CHANNEL}`);
      const heard = payloads(listener);
      const cluster = store.cluster();
      await cluster.heartbeatNode("n1", 60_000);
      const first = await store.createExecution({ ...newExecution(), ownerNode: "n1" });
      expect(await heard.next()).toBe(`created ${first.id}`);
      await cluster.setExecutionOwner(first.id, "n2");
      expect(await heard.next()).toBe(`owner ${first.id} n2`);
      await cluster.adoptExecutions("n2", "n1");
      expect(await heard.next()).toBe("adopted n2 n1");
      // The cap refuses this create: its transaction rolls back, and nothing is announced.
      store.limitRunning(1);
      await expect(store.createExecution(newExecution())).rejects.toMatchObject({
        code: "too_many_executions",
      });
      store.limitRunning(undefined);
      await store.finishExecution(first.id, "completed");
      expect(await heard.next()).toBe(`completed ${first.id}`);
      const second = await store.createExecution({ ...newExecution(), ownerNode: "n1" });
      expect(await heard.next()).toBe(`created ${second.id}`);
      expect(await cluster.executionOwnerLive(second.id)).toBe(true);
      await cluster.removeNode("n1");
      expect(await heard.next()).toBe("left n1");
      expect(await cluster.executionOwnerLive(second.id)).toBe(false);
      expect(await cluster.claimExecution(second.id, "n3")).toEqual({ claimed: true, owner: "n3" });
      expect(await heard.next()).toBe(`owner ${second.id} n3`);
      await store.finishExecution(second.id, "cancelled");
      expect(await heard.next()).toBe(`cancelled ${second.id}`);
      expect(await cluster.endedExecutionsOwnedBy("n1", 60_000)).toEqual([first.id]);
      expect(await cluster.endedExecutionsOwnedBy("n3", 60_000)).toEqual([second.id]);
    } finally {
      await listener.end();
    }
  });

  it("listens again after its connection is terminated, and reports that changes may have been missed", async () => {
    const applicationName = `factflow-test-listen-${process.pid}`;
    const log = recordingLogger();
    const seen = changes();
    const notifications = new ClusterNotifications({
      databaseUrl: database.url,
      applicationName,
      logger: log.logger,
      minBackoffMs: 10,
    });
    try {
      await notifications.start(seen.onChange);
      expect(notifications.listening).toBe(true);
      await store.createExecution(newExecution());
      await seen.reach(1);

      const cut = await admin.query(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1 and datname = current_database()",
        [applicationName],
      );
      expect(cut.rowCount).toBe(1);
      // Reconnected: told once, since notifications sent during the gap are lost.
      await seen.reach(2);
      expect(notifications.listening).toBe(true);
      expect(log.lines.some((l) => l.level === "warn" && l.message.includes("connection was lost"))).toBe(
        true,
      );
      expect(log.lines.some((l) => l.message.includes("listening for cluster notifications again"))).toBe(
        true,
      );
      // And it hears what is announced from then on.
      await store.createExecution(newExecution());
      await seen.reach(3);
      const active = await admin.query(
        "select count(*)::int as n from pg_stat_activity where application_name = $1 and datname = current_database()",
        [applicationName],
      );
      expect(active.rows[0].n).toBe(1);
    } finally {
      await notifications.stop();
    }
    expect(notifications.listening).toBe(false);
  });
});
