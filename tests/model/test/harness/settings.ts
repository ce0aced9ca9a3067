/**
 * How `pnpm test:model` was asked to run (tests/model/run.mjs turns its flags into these variables):
 * `--seed S [--path P]` replays a case, `--runs N` and `--provider a,b` soak.
 */
export interface ModelSettings {
  readonly seed?: number;
  readonly path?: string;
  readonly runs?: number;
  readonly providers?: readonly string[];
}

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
  return {
    ...(seed === undefined ? {} : { seed }),
    ...(runs === undefined ? {} : { runs }),
    ...(path === undefined || path === "" ? {} : { path }),
    ...(providers === undefined || providers === ""
      ? {}
      : { providers: providers.split(",").map((p) => p.trim()) }),
  };
}
