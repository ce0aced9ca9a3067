import { existsSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";

// Where the integration tests find the machine's real services; every URL can be overridden by env.
export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
export const REQUIRE_SERVICES = process.env.FACTFLOW_REQUIRE_SERVICES === "1";

/** The URL `scripts/services/artemis.sh` recorded for the broker it started, if any. */
function recordedArtemisUrl(): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

// Resolved like the Artemis package's own tests (packages/infra/artemis/test/helpers.ts).
export const ARTEMIS_URL = process.env.ARTEMIS_STOMP_URL ?? recordedArtemisUrl() ?? "stomp://127.0.0.1:61613";

/** Why a TCP connection to the URL's host and port fails, or undefined when it opens. */
export function probeTcp(url: string): Promise<string | undefined> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), timeout: 2000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve(`${hostname}:${port} timed out`);
    });
    socket.once("error", (error) => resolve(`${hostname}:${port} ${error.message}`));
  });
}

/**
 * Probes the services a group of tests needs. Returns undefined when all answer; otherwise warns
 * with the reason and returns it (the caller skips) — or throws under FACTFLOW_REQUIRE_SERVICES=1,
 * where a missing service is a failure.
 */
export async function unreachable(what: string, urls: readonly string[]): Promise<string | undefined> {
  const problems = (await Promise.all(urls.map(probeTcp))).filter((p) => p !== undefined);
  if (problems.length === 0) return undefined;
  const reason = problems.join("; ");
  if (REQUIRE_SERVICES) {
    throw new Error(`[server] ${what} needs its services (FACTFLOW_REQUIRE_SERVICES=1): ${reason}`);
  }
  console.warn(`[server] skipping ${what}: ${reason}`);
  return reason;
}

/**
 * A database of the test's own on the machine's PostgreSQL (`prefix` plus a unique suffix): its URL
 * and name, `admin` to run a statement on the maintenance database (e.g. `pg_terminate_backend` of
 * the test database's sessions) from a connection of the test's own, and `drop`.
 */
export async function createTestDatabase(prefix: string): Promise<{
  url: string;
  name: string;
  admin(statement: string): Promise<void>;
  drop(): Promise<void>;
}> {
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  const run = async (on: string, statement: string) => {
    const { connectPostgres } = await import("@factflow/lineage");
    const handles = await connectPostgres(on, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
    try {
      await handles.writer.execute(statement, []);
    } finally {
      await handles.close();
    }
  };
  await run(DATABASE_URL, `create database "${name}"`);
  return {
    url: url.toString(),
    name,
    admin: (statement) => run(DATABASE_URL, statement),
    drop: () => run(DATABASE_URL, `drop database if exists "${name}" with (force)`),
  };
}
