import { resolveService, SERVICES } from "@factflow/infra-testkit";
import { Client } from "pg";
import { afterAll, beforeAll } from "vitest";
import { openLineageDatabase } from "../src/index.js";

/**
 * DATABASE_URL when set; else a PostgreSQL container (testcontainers) when a container engine runs;
 * else the machine's PostgreSQL (CONTRIBUTING.md, "What runs where"). Testcontainers' reaper removes
 * the container when the test process exits.
 */
export const DATABASE_URL = (await resolveService(SERVICES.postgres)).url;
const REQUIRE = process.env.FACTFLOW_REQUIRE_SERVICES === "1";

/** Checks that PostgreSQL answers; returns why not, or undefined when it does. */
export async function probePostgres(): Promise<string | undefined> {
  try {
    const client = await openAdminClient(DATABASE_URL, 3);
    await client.end();
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message || String(error) : String(error);
  }
}

/**
 * A connected node-postgres client of the test's own (set-up, inspection, killing backends), never
 * one of the code under test. Its `error` event is ignored: a test may cut its connection too.
 */
export async function openAdminClient(url: string, connectTimeoutSeconds = 10): Promise<Client> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: connectTimeoutSeconds * 1000 });
  client.on("error", () => {});
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
  return client;
}

/** Runs one statement on a connection of its own to `url`, then closes it. */
async function adminQuery(url: string, text: string): Promise<void> {
  const client = await openAdminClient(url);
  try {
    await client.query(text);
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * Probes once at module load. Returns true when the tests must be skipped (after a warning);
 * with FACTFLOW_REQUIRE_SERVICES=1 an unreachable server is an error instead.
 */
export async function skipWithoutPostgres(): Promise<boolean> {
  const reason = await probePostgres();
  if (reason === undefined) return false;
  if (REQUIRE)
    throw new Error(
      `PostgreSQL at DATABASE_URL is required (FACTFLOW_REQUIRE_SERVICES=1) but unreachable: ${reason}`,
    );
  console.warn(`[lineage] skipping PostgreSQL integration tests: cannot reach DATABASE_URL (${reason})`);
  return true;
}

/** Creates a database with a unique name through the maintenance database; returns its URL and a dropper. */
export async function createTestDatabase(
  prefix = "factflow_lineage",
): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await adminQuery(DATABASE_URL, `create database "${name}"`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await adminQuery(DATABASE_URL, `drop database if exists "${name}" with (force)`);
    },
  };
}

/** A scratch database with the lineage schema, and an admin connection to read it back. */
export interface MigratedDatabase {
  readonly url: string;
  readonly admin: Client;
}

/**
 * Registers hooks in the calling `describe` that create a migrated scratch database before its tests
 * and drop it after them; read `url` and `admin` inside the tests.
 */
export function useMigratedDatabase(prefix: string): MigratedDatabase {
  let url = "";
  let admin: Client | undefined;
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const created = await createTestDatabase(prefix);
    url = created.url;
    drop = created.drop;
    // Creates the schema.
    await (await openLineageDatabase({ databaseUrl: url })).close();
    admin = await openAdminClient(url);
  });
  afterAll(async () => {
    await admin?.end();
    await drop?.();
  });
  return {
    get url() {
      return url;
    },
    get admin() {
      if (admin === undefined) throw new Error("the scratch database is only open inside the tests");
      return admin;
    },
  };
}
