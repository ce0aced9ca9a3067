/**
 * A throw-away PostgreSQL database for one benchmark run: created through the `postgres`
 * maintenance database of `DATABASE_URL` under a random `factflow_bench_*` name, dropped by `drop`.
 */
import { randomBytes } from "node:crypto";
import { Client } from "pg";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** A created database: its URL, its name, and `drop`, which removes it (idempotent). */
export interface ScratchDatabase {
  readonly name: string;
  readonly url: string;
  drop(): Promise<void>;
}

/** `url` with another database name. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

/** Creates an empty database; throws a message saying how to fix it when PostgreSQL refuses. */
export async function createScratchDatabase(): Promise<ScratchDatabase> {
  const name = `factflow_bench_${randomBytes(4).toString("hex")}`;
  const admin = new Client({ connectionString: withDatabase(DATABASE_URL, "postgres") });
  admin.on("error", () => {});
  try {
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
  } catch (error) {
    await admin.end().catch(() => {});
    throw new Error(
      `[factflow/bench] cannot create the database "${name}" through DATABASE_URL's "postgres" database: ${(error as Error).message}. Start PostgreSQL or set DATABASE_URL to a user that may CREATE DATABASE.`,
    );
  }
  let dropped: Promise<void> | undefined;
  return {
    name,
    url: withDatabase(DATABASE_URL, name),
    drop() {
      dropped ??= (async () => {
        await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {});
        await admin.end().catch(() => {});
      })();
      return dropped;
    },
  };
}
