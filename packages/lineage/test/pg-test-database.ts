import postgres from "postgres";

/** The machine's PostgreSQL, overridable by env. */
export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const REQUIRE = process.env.FACTFLOW_REQUIRE_SERVICES === "1";

/** Checks that PostgreSQL answers; returns why not, or undefined when it does. */
export async function probePostgres(): Promise<string | undefined> {
  const sql = postgres(DATABASE_URL, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await sql`select 1`;
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    await sql.end({ timeout: 1 });
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
  const admin = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database "${name}"`);
  await admin.end();
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const sql = postgres(DATABASE_URL, { max: 1, onnotice: () => {} });
      try {
        await sql.unsafe(`drop database if exists "${name}" with (force)`);
      } finally {
        await sql.end();
      }
    },
  };
}
