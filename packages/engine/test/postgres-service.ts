import { probeTcp, resolveService, SERVICES } from "@factflow/infra-testkit";
import { connectPostgres } from "@factflow/lineage";

/** The PostgreSQL server of the integration tests, and databases of their own on it. */
export interface PostgresService {
  /** Why the server cannot be reached, or undefined when it can. */
  readonly down: string | undefined;
  /** FACTFLOW_REQUIRE_SERVICES=1: an unreachable server fails the tests instead of skipping them. */
  readonly required: boolean;
  /** A new database named `<prefix>_<pid>_<time>`, dropped by `drop`. */
  database(prefix: string): Promise<{ url: string; drop(): Promise<void> }>;
  stop(): Promise<void>;
}

/** Resolves and probes the server; says which tests it skips (`skipping`) when it is down and not required. */
export async function postgresService(skipping: string): Promise<PostgresService> {
  const postgres = await resolveService(SERVICES.postgres);
  const at = new URL(postgres.url);
  const probe = await probeTcp(at.hostname, Number(at.port || 5432), 2000);
  const down = probe.ok ? undefined : probe.reason;
  const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
  if (down !== undefined && !required) console.warn(`[engine] skipping ${skipping}: ${down}`);
  const admin = async (statement: string) => {
    const handles = await connectPostgres(postgres.url, { poolSize: 1, lineagePoolSize: 1 });
    try {
      await handles.writer.execute(statement, []);
    } finally {
      await handles.close();
    }
  };
  return {
    down,
    required,
    async database(prefix) {
      const name = `${prefix}_${process.pid}_${Date.now().toString(36)}`;
      await admin(`create database ${name}`);
      const url = new URL(postgres.url);
      url.pathname = `/${name}`;
      return { url: url.toString(), drop: () => admin(`drop database if exists ${name} with (force)`) };
    },
    stop: () => postgres.stop(),
  };
}
