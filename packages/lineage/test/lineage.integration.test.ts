import { type Logger, silentLogger } from "@factflow/protocols";
import { Kysely, PostgresDialect } from "kysely";
import { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createPostgresSqlRunner,
  type LineageDatabase,
  type LineageDatabaseSchema,
  LineageStore,
  openLineageDatabase,
  uuidv7,
} from "../src/index.js";
import { lineageSuite, row } from "./lineage-suite.js";
import { createTestDatabase, openAdminClient, skipWithoutPostgres } from "./pg-test-database.js";

const skip = await skipWithoutPostgres();

let drop: (() => Promise<void>) | undefined;
lineageSuite(
  "postgres",
  {
    async open() {
      const created = await createTestDatabase();
      drop = created.drop;
      return openLineageDatabase({ databaseUrl: created.url });
    },
    async cleanup() {
      await drop?.();
    },
  },
  skip,
);

describe.skipIf(skip)("PostgreSQL failures", () => {
  let url = "";
  let dropDb: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const created = await createTestDatabase("factflow_outage");
    url = created.url;
    dropDb = created.drop;
  });
  afterAll(async () => {
    await dropDb?.();
  });

  it("names the URL without its password when the server is down at start", async () => {
    const err = await openLineageDatabase({
      databaseUrl: "postgres://factflow:s3cret-pw@127.0.0.1:1/factflow",
      postgres: { connectTimeoutSeconds: 2 },
    }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "lineage_error", retryable: true });
    const message = (err as Error).message;
    expect(message).toContain("postgres://factflow:<redacted>@127.0.0.1:1/factflow");
    expect(message).toContain("connection refused");
    expect(message).toContain("DATABASE_URL");
    expect(message).not.toContain("s3cret-pw");
  });

  it("says so when the database does not exist", async () => {
    const missing = new URL(url);
    missing.pathname = "/factflow_missing_db_zz";
    await expect(openLineageDatabase({ databaseUrl: missing.toString() })).rejects.toThrow(
      /database does not exist/,
    );
  });

  it("retries, then counts writes as lost when the server is unreachable mid-run", async () => {
    // A writer whose pool points at a port nobody listens on: every commit fails.
    const pool = new Pool({
      connectionString: "postgres://postgres@127.0.0.1:1/nowhere",
      max: 1,
      connectionTimeoutMillis: 1000,
    });
    const db = new Kysely<LineageDatabaseSchema>({ dialect: new PostgresDialect({ pool }) });
    const warnings: string[] = [];
    const errors: string[] = [];
    const logger = {
      ...silentLogger,
      warn: (m: string) => warnings.push(m),
      error: (m: string) => errors.push(m),
    };
    const runner = createPostgresSqlRunner("postgres://postgres@127.0.0.1:1/nowhere", {
      connectTimeoutSeconds: 1,
    });
    const lineage = new LineageStore(db, runner, logger, { attempts: 3, retryDelayMs: 10 });
    const exec = uuidv7();
    for (let i = 0; i < 5; i++) lineage.record(row(exec));
    await lineage.flush();
    expect(lineage.counters()).toMatchObject({ written: 0, lost: 5, retriedWrites: 10, queued: 0 });
    expect(warnings.filter((w) => w.includes("retrying"))).toHaveLength(2);
    expect(errors).toEqual(["lineage batch lost after retries"]);
    await lineage.close();
    await runner.close();
    await db.destroy();
  });

  it("survives its connection being terminated mid-run without losing lineage", async () => {
    const app = `factflow-lineage-test-${Math.random().toString(36).slice(2, 8)}`;
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (m: string) => warnings.push(m), child: () => logger };
    const database: LineageDatabase = await openLineageDatabase({
      databaseUrl: url,
      postgres: { lineageApplicationName: app },
      writer: { retryDelayMs: 20, attemptTimeoutMs: 3000 },
      logger,
    });
    const admin = await openAdminClient(url);
    try {
      const exec = uuidv7();
      let terminated = 0;
      for (let round = 0; round < 5; round++) {
        for (let i = 0; i < 200; i++) database.lineage.record(row(exec, { status: "completed" }));
        const flushed = database.lineage.flush();
        const killed = await admin.query(
          "select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1",
          [`${app}-writer`],
        );
        terminated += killed.rows.length;
        await flushed;
      }
      await database.lineage.flush();
      expect(terminated).toBeGreaterThan(0);
      expect(database.lineage.counters()).toMatchObject({ lost: 0, queued: 0 });
      expect((await database.lineage.rows(exec, { limit: 1 })).total).toBe(1000);
    } finally {
      await admin.end();
      await database.close();
    }
  });
});
