import { createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import type { NewExecution, PipelineConfig } from "@factflow/protocols";
import { sql } from "kysely";
import type { Client } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectPostgres, type LineageDatabase, openLineageDatabase, uuidv7 } from "../src/index.js";
import {
  createTestDatabase,
  DATABASE_URL,
  openAdminClient,
  skipWithoutPostgres,
} from "./pg-test-database.js";

// A connection that dies under the store (pg_terminate_backend, a server restart, a network cut) must
// never crash the process, hang a caller or leave a pool unusable. node-postgres emits `error` on a
// client whose connection dies, and one without a listener (a client checked out between two
// statements of a transaction, say) is an uncaught exception. These tests kill the store's backends
// while it is busy (and cut the server off through a relay, as a restart would) and check that the
// process survives, that the calls caught in the outage reject with a clear, retryable FactflowError,
// and that the store recovers by itself.

const skip = await skipWithoutPostgres();

const snapshot = {
  name: "outage",
  init: { route: "parse", message: {} },
  routes: { parse: { inbound: { queue: "parse.in" }, adapters: [{ type: "noop" }] } },
} as unknown as PipelineConfig;

function newExecution(): NewExecution {
  return { id: uuidv7(), configName: "outage", configVersion: null, configSnapshot: snapshot, input: null };
}

/** Settles like `promise`, or rejects with a marker error when it does not settle in time (a hang). */
class Hung extends Error {}
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Hung(`did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** Polls `check` until it returns true or the deadline passes. */
async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A TCP relay in front of PostgreSQL that can be taken down (every connection cut, new ones refused)
 * and brought back on the same port: what the store sees when the server restarts.
 */
class OutageRelay {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = tcpConnect(this.targetPort, this.targetHost);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on("close", () => this.#sockets.delete(s));
        s.on("error", () => {});
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.#server = server;
  }

  async down(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server !== undefined) await new Promise((resolve) => server.close(resolve));
  }
}

describe.skipIf(skip)("execution store while PostgreSQL connections die", () => {
  let url = "";
  let dbName = "";
  let drop: (() => Promise<void>) | undefined;
  let database: LineageDatabase | undefined;
  let admin: Client | undefined;
  const crashes: unknown[] = [];
  const onCrash = (error: unknown) => crashes.push(error);

  beforeAll(async () => {
    const created = await createTestDatabase("factflow_store_outage");
    url = created.url;
    drop = created.drop;
    dbName = new URL(url).pathname.slice(1);
    process.on("uncaughtException", onCrash);
    process.on("unhandledRejection", onCrash);
    database = await openLineageDatabase({
      databaseUrl: url,
      postgres: { poolSize: 4, lineagePoolSize: 2, connectTimeoutSeconds: 3 },
    });
    admin = await openAdminClient(DATABASE_URL);
  });

  afterAll(async () => {
    process.off("uncaughtException", onCrash);
    process.off("unhandledRejection", onCrash);
    await database?.close();
    await admin?.end();
    await drop?.();
  });

  /** Terminates every backend of the store pool (application_name "factflow") in the test database. */
  async function killStoreBackends(): Promise<number> {
    const killed = await admin!.query(
      `select pg_terminate_backend(pid) from pg_stat_activity
        where datname = $1 and application_name = 'factflow' and pid <> pg_backend_pid()`,
      [dbName],
    );
    return killed.rows.length;
  }

  it("survives repeated pg_terminate_backend under load, rejects with errors and recovers", async () => {
    const store = database!.executions;
    let ok = 0;
    const failures: unknown[] = [];
    let stop = false;
    // Each worker runs create → get → list in a loop; every call must settle (no hang).
    const worker = async () => {
      while (!stop) {
        try {
          const created = await within(store.createExecution(newExecution()), 15_000);
          const read = await within(store.getExecution(created.id), 15_000);
          expect(read?.id).toBe(created.id);
          await within(store.listExecutions({ limit: 5 }), 15_000);
          ok++;
        } catch (error) {
          failures.push(error);
          if (error instanceof Hung) return;
        }
      }
    };
    const workers = Array.from({ length: 4 }, () => worker());

    let killed = 0;
    try {
      for (let round = 0; round < 6; round++) {
        // Kill only once the store is demonstrably working again since the previous kill.
        const before = ok;
        await until(
          () => ok > before || crashes.length > 0,
          20_000,
          `store calls to succeed (round ${round})`,
        );
        expect(crashes).toEqual([]);
        killed += await killStoreBackends();
      }
      const afterKills = ok;
      await until(() => ok > afterKills + 3 || crashes.length > 0, 20_000, "store calls after the last kill");
    } finally {
      stop = true;
      await Promise.all(workers);
    }

    expect(crashes).toEqual([]);
    expect(killed).toBeGreaterThanOrEqual(6);
    // The kills land while calls are in flight, so some calls must have failed (cleanly).
    expect(failures.length).toBeGreaterThan(0);
    expect(failures.filter((f) => f instanceof Hung)).toEqual([]);
    for (const failure of failures) {
      expect(failure).toBeInstanceOf(Error);
      expect(failure).toMatchObject({ name: "FactflowError", code: "lineage_error", retryable: true });
      expect((failure as Error).message).toMatch(/\[factflow\/lineage\]/);
    }
    // After the outage every kind of store call works again, on every pooled connection.
    const results = await within(
      Promise.all(Array.from({ length: 12 }, () => store.listExecutions({ limit: 1 }))),
      15_000,
    );
    expect(results.every((r) => r.total >= ok)).toBe(true);
  }, 180_000);

  it("rejects with a clear error while the server is down and recovers when it is back", async () => {
    const target = new URL(url);
    const relay = new OutageRelay(target.hostname, Number(target.port || 5432));
    await relay.up();
    const viaRelay = new URL(url);
    viaRelay.host = `127.0.0.1:${relay.port}`;
    const restarted = await openLineageDatabase({
      databaseUrl: viaRelay.toString(),
      postgres: { poolSize: 3, lineagePoolSize: 1, connectTimeoutSeconds: 3 },
    });
    try {
      const store = restarted.executions;
      await Promise.all(Array.from({ length: 6 }, () => store.listExecutions({ limit: 1 })));

      await relay.down();
      // Enough failed calls that an uncapped reconnect backoff would have grown to many seconds.
      for (let i = 0; i < 10; i++) {
        const error = await within(store.listExecutions({ limit: 1 }), 10_000).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).not.toBeInstanceOf(Hung);
        expect(error).toMatchObject({ name: "FactflowError", code: "lineage_error", retryable: true });
        expect((error as Error).message).toContain(`127.0.0.1:${relay.port}`);
      }

      await relay.up();
      // The first calls after the restart may still meet a connection of the outage; within seconds
      // every call opens a fresh one and works again.
      const backAt = Date.now();
      const deadline = backAt + 10_000;
      for (;;) {
        try {
          const created = await within(store.createExecution(newExecution()), 10_000);
          expect((await within(store.getExecution(created.id), 10_000))?.id).toBe(created.id);
          console.info(`[store-outage] working again ${Date.now() - backAt} ms after the server came back`);
          break;
        } catch (error) {
          expect(error).not.toBeInstanceOf(Hung);
          expect(error).toMatchObject({ name: "FactflowError", retryable: true });
          if (Date.now() > deadline) throw error;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      await within(Promise.all(Array.from({ length: 6 }, () => store.listExecutions({ limit: 1 }))), 10_000);
      expect(crashes).toEqual([]);
    } finally {
      await restarted.close();
      await relay.down();
    }
  }, 180_000);

  it("recovers when an idle pool's connections are all terminated", async () => {
    const store = database!.executions;
    await store.listExecutions({ limit: 1 });
    expect(await killStoreBackends()).toBeGreaterThan(0);
    // The first calls may meet the dead connections; within a few tries every call succeeds again.
    const deadline = Date.now() + 15_000;
    let lastError: unknown;
    for (;;) {
      try {
        const execution = await within(store.createExecution(newExecution()), 10_000);
        expect((await within(store.getExecution(execution.id), 10_000))?.status).toBe("running");
        break;
      } catch (error) {
        expect(error).not.toBeInstanceOf(Hung);
        lastError = error;
        if (Date.now() > deadline) throw lastError;
      }
    }
    await within(Promise.all(Array.from({ length: 8 }, () => store.listExecutions({ limit: 1 }))), 10_000);
    expect(crashes).toEqual([]);
  });

  it("rejects the next statement of a transaction whose connection was killed, without crashing", async () => {
    const handles = await connectPostgres(url, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
    try {
      const outcome = await within(
        handles.db
          .transaction()
          .execute(async (trx) => {
            const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
            const pid = rows[0]!.pid;
            // The connection is checked out of the pool, idle between two statements, when it dies.
            await admin!.query("select pg_terminate_backend($1)", [pid]);
            const deadline = Date.now() + 10_000;
            while (
              (await admin!.query("select 1 from pg_stat_activity where pid = $1", [pid])).rows.length > 0
            ) {
              if (Date.now() > deadline) throw new Error(`backend ${pid} still alive after 10 s`);
              await new Promise((r) => setTimeout(r, 20));
            }
            await sql`select 1`.execute(trx);
          })
          .then(
            () => undefined,
            (e: unknown) => e,
          ),
        15_000,
      );
      expect(outcome).toMatchObject({ name: "FactflowError", code: "lineage_error", retryable: true });
      expect(crashes).toEqual([]);
      // The dead connection left the pool: the next call gets a fresh one.
      await within(sql`select 1`.execute(handles.db), 10_000);
      expect(crashes).toEqual([]);
    } finally {
      await handles.close();
    }
  });
});
