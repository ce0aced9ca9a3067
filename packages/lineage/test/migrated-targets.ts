import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectPglite, connectPostgres, type DatabaseHandles, openLineageDatabase } from "../src/index.js";
import { createTestDatabase, skipWithoutPostgres } from "./pg-test-database.js";

/** A migrated database of one dialect, opened as raw handles so a test can reach the writer's runner. */
export interface MigratedTarget {
  readonly handles: DatabaseHandles;
  cleanup(): Promise<void>;
}

export interface Dialect {
  readonly dialect: "PGlite" | "PostgreSQL";
  open(): Promise<MigratedTarget>;
}

async function pgliteTarget(prefix: string): Promise<MigratedTarget> {
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-`));
  // Migrate through the public entry point, then reopen the raw handles.
  await (await openLineageDatabase({ dataDir: dir })).close();
  const handles = await connectPglite(dir);
  return {
    handles,
    async cleanup() {
      await handles.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function postgresTarget(prefix: string): Promise<MigratedTarget> {
  const created = await createTestDatabase(prefix.replaceAll("-", "_"));
  await (await openLineageDatabase({ databaseUrl: created.url })).close();
  const handles = await connectPostgres(created.url);
  return {
    handles,
    async cleanup() {
      await handles.close();
      await created.drop();
    },
  };
}

/**
 * The dialects a test runs on: PGlite always; PostgreSQL when it is reachable (otherwise
 * skipWithoutPostgres says so at run time, and fails the run under FACTFLOW_REQUIRE_SERVICES=1).
 */
export async function migratedDialects(prefix: string): Promise<Dialect[]> {
  const dialects: Dialect[] = [{ dialect: "PGlite", open: () => pgliteTarget(prefix) }];
  if (!(await skipWithoutPostgres()))
    dialects.push({ dialect: "PostgreSQL", open: () => postgresTarget(prefix) });
  return dialects;
}
