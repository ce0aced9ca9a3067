import type { Kysely } from "kysely";
import type { LineageDatabaseSchema } from "./schema.js";
import type { LineageSqlRunner } from "./sql-runner.js";

/** The two Kysely handles behind one lineage database. */
export interface DatabaseHandles {
  readonly dialect: "postgres" | "pglite";
  /** Configs and executions. */
  readonly db: Kysely<LineageDatabaseSchema>;
  /** Lineage queries: a separate pool, so lineage never queues behind the store. */
  readonly lineageDb: Kysely<LineageDatabaseSchema>;
  /** The lineage writer's own channel. */
  readonly writer: LineageSqlRunner;
  /** Where the data lives, safe to print. */
  readonly location: string;
  close(): Promise<void>;
}
