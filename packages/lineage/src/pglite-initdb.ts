import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { PGLITE_INITDB_ARGS, pgliteSettings } from "./pglite-settings.js";

/**
 * The child's whole program: opens (so creates) the database in a directory with the given start
 * and `initdb` parameters, and closes it. Plain CommonJS, run with `node -e`.
 */
const INITDB_SOURCE = `
const [pglitePath, dir, startParams, initDbArgs] = process.argv.slice(1);
const { PGlite } = require(pglitePath);
PGlite.create(dir, {
  startParams: [...PGlite.defaultStartParams, ...JSON.parse(startParams)],
  initDbStartParams: JSON.parse(initDbArgs),
})
  .then((db) => db.close())
  .catch((error) => {
    process.stderr.write(String(error && error.message ? error.message : error));
    process.exit(1);
  });
`;

/**
 * Makes a new database in the empty directory `dir` in a child process and waits for it to end.
 * PostgreSQL's `initdb` takes seconds of CPU and ~750 MB of memory: on a worker thread of this
 * process it still held the event loop for up to a few hundred milliseconds; in a process of its
 * own it shares only the cores.
 */
export async function initializeInChildProcess(dir: string): Promise<void> {
  const pglitePath = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  const startParams = JSON.stringify(await pgliteSettings(dir));
  const child = spawn(
    process.execPath,
    ["-e", INITDB_SOURCE, pglitePath, dir, startParams, JSON.stringify(PGLITE_INITDB_ARGS)],
    // The parent's NODE_OPTIONS (a loader, a heap size) are not the child's business.
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, NODE_OPTIONS: "" } },
  );
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (chunk: string) => {
    stderr += chunk;
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", resolve);
  });
  if (code !== 0)
    throw new Error(`PGlite could not create a database in ${dir} (exit code ${code}): ${stderr.trim()}`);
}
