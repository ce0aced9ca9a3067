/**
 * `pnpm bench <name> [args...]` runs `bench/<name>.ts`, whose `run(args)` measures Factflow against a
 * baseline taken in the same run and prints one JSON line per mode.
 */
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

async function available(): Promise<string[]> {
  const files = await readdir(here);
  return files
    .filter((f) => f.endsWith(".ts") && f !== "run.ts" && !f.startsWith("_"))
    .map((f) => f.slice(0, -3))
    .sort();
}

async function main(): Promise<void> {
  const [name, ...args] = process.argv.slice(2);
  const names = await available();
  if (name === undefined || !names.includes(name)) {
    const shown = name === undefined ? "no benchmark named" : `unknown benchmark "${name}"`;
    console.error(`[factflow/bench] ${shown}. Run one of: ${names.map((n) => `pnpm bench ${n}`).join(", ")}`);
    process.exitCode = 2;
    return;
  }
  const module = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as {
    run?: (args: string[]) => Promise<void>;
  };
  if (typeof module.run !== "function") {
    console.error(`[factflow/bench] bench/${name}.ts does not export run(args)`);
    process.exitCode = 2;
    return;
  }
  await module.run(args);
}

await main();
