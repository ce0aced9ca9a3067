import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import { createDatabase } from "./databases.js";
import type { ModelLineage } from "./settings.js";

/** The lineage store model runs write to; `undefined` lets the runner open its in-memory one. */
export interface ModelLineageStore {
  readonly lineage: LineageDatabase | undefined;
  close(): Promise<void>;
}

/** PGlite in a temporary directory or a scratch PostgreSQL database, removed by `close`. */
export async function openModelLineage(kind: ModelLineage | undefined): Promise<ModelLineageStore> {
  if (kind === undefined || kind === "memory") return { lineage: undefined, close: async () => {} };
  if (kind === "pglite") {
    const dir = await mkdtemp(join(tmpdir(), "factflow-model-lineage-"));
    const lineage = await openLineageDatabase({ dataDir: dir });
    return {
      lineage,
      async close() {
        await lineage.close();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  const database = await createDatabase("factflow_model_lineage");
  const lineage = await openLineageDatabase({ databaseUrl: database.url });
  return {
    lineage,
    async close() {
      await lineage.close();
      await database.drop();
    },
  };
}
