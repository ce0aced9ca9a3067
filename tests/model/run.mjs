#!/usr/bin/env node
// `pnpm test:model [--seed S] [--path P] [--runs N] [--provider a,b]`: the model suite with its
// flags turned into the environment the test reads (tests/model/test/harness/settings.ts).
import { spawnSync } from "node:child_process";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

const flags = {
  "--seed": "FACTFLOW_MODEL_SEED",
  "--path": "FACTFLOW_MODEL_PATH",
  "--runs": "FACTFLOW_MODEL_RUNS",
  "--provider": "FACTFLOW_MODEL_PROVIDERS",
  "--lineage": "FACTFLOW_MODEL_LINEAGE",
};
const env = { ...process.env };
const rest = [];
const args = process.argv.slice(2);
for (let i = 0; i < args.length; i++) {
  const [flag, inline] = args[i].split("=", 2);
  const name = flags[flag];
  if (name === undefined) {
    rest.push(args[i]);
    continue;
  }
  const value = inline ?? args[++i];
  if (value === undefined) {
    console.error(
      `[model] ${flag} needs a value, e.g. ${flag} ${flag === "--provider" ? "embedded-file" : "42"}`,
    );
    process.exit(2);
  }
  env[name] = value;
}
const result = spawnSync("pnpm", ["exec", "vitest", "run", ...rest], {
  cwd: dirname(fileURLToPath(import.meta.url)),
  env,
  stdio: "inherit",
});
process.exit(result.status ?? 1);
