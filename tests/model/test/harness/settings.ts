/**
 * How `pnpm test:model` was asked to run (tests/model/run.mjs turns its flags into these variables):
 * `--seed S [--path P]` replays a case, `--runs N` and `--provider a,b` soak, `--lineage` picks the
 * lineage store of the model runs.
 */
export interface ModelSettings {
  readonly seed?: number;
  readonly path?: string;
  readonly runs?: number;
  readonly providers?: readonly string[];
  /** Where `model.test` keeps lineage: in memory (default), PGlite, or a scratch PostgreSQL database. */
  readonly lineage?: ModelLineage;
}

export type ModelLineage = "memory" | "pglite" | "postgres";
const LINEAGES: readonly ModelLineage[] = ["memory", "pglite", "postgres"];

function int(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value)) throw new Error(`${name}=${raw} is not an integer`);
  return value;
}

export function modelSettings(): ModelSettings {
  const seed = int("FACTFLOW_MODEL_SEED");
  const runs = int("FACTFLOW_MODEL_RUNS");
  const path = process.env.FACTFLOW_MODEL_PATH;
  const providers = process.env.FACTFLOW_MODEL_PROVIDERS;
  const lineage = process.env.FACTFLOW_MODEL_LINEAGE;
  if (lineage !== undefined && lineage !== "" && !LINEAGES.includes(lineage as ModelLineage))
    throw new Error(`FACTFLOW_MODEL_LINEAGE=${lineage}: use ${LINEAGES.join(", ")}`);
  return {
    ...(lineage === undefined || lineage === "" ? {} : { lineage: lineage as ModelLineage }),
    ...(seed === undefined ? {} : { seed }),
    ...(runs === undefined ? {} : { runs }),
    ...(path === undefined || path === "" ? {} : { path }),
    ...(providers === undefined || providers === ""
      ? {}
      : { providers: providers.split(",").map((p) => p.trim()) }),
  };
}
