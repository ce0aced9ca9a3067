import { mkdir } from "node:fs/promises";
import { createRequire } from "node:module";
import { resolve } from "node:path";
import type { PGlite } from "@electric-sql/pglite";
import { FactflowError } from "@factflow/protocols";
import { Kysely, PGliteDialect } from "kysely";
import { describeConnectError } from "./connection-errors.js";
import type { DatabaseHandles } from "./database-handles.js";
import { initializeInChildProcess } from "./pglite-initdb.js";
import { PGLITE_INITDB_ARGS, pgliteSettings } from "./pglite-settings.js";
import { isEmptyDir, pgliteTemplateRoot, seedFromTemplate } from "./pglite-template.js";
import { PgliteWorkerClient } from "./pglite-worker.js";
import type { LineageDatabaseSchema } from "./schema.js";
import { createPgliteSqlRunner, createPgliteWorkerSqlRunner, type LineageSqlRunner } from "./sql-runner.js";

/**
 * `@factflow/lineage/pglite`: the embedded PGlite database. The only module of the package that
 * loads `@electric-sql/pglite` (an optional peer dependency); `openLineageDatabase` imports it
 * when no database URL is given.
 */
export { createPgliteSqlRunner } from "./sql-runner.js";

function pgliteMissing(error: unknown): FactflowError {
  return new FactflowError(
    "lineage_error",
    "[factflow/lineage] the embedded database needs the optional package @electric-sql/pglite, which is not installed " +
      `(${describeConnectError(error)}). Install it next to @factflow/lineage (npm install @electric-sql/pglite), ` +
      "or set DATABASE_URL to use PostgreSQL.",
    { cause: error },
  );
}

/**
 * Loads PGlite, an optional peer dependency: a missing package becomes an error that says how to
 * install it or use PostgreSQL instead. Only a database on the calling thread needs the module here.
 */
async function loadPglite(): Promise<typeof PGlite> {
  try {
    return (await import("@electric-sql/pglite")).PGlite;
  } catch (error) {
    throw pgliteMissing(error);
  }
}

/**
 * Checks that PGlite is installed without loading it: the worker thread loads it, and evaluating
 * the module here would hold the event loop for a couple of hundred milliseconds.
 */
function checkPgliteInstalled(): void {
  try {
    createRequire(import.meta.url).resolve("@electric-sql/pglite");
  } catch (error) {
    throw pgliteMissing(error);
  }
}

/** PGlite directories open in this process: a second instance on the same files would corrupt them. */
const openPgliteDirs = new Set<string>();

/**
 * Opens (creating if needed) the embedded PGlite database in `<dataDir>/pglite`. With `worker` (the
 * default) PGlite runs on a worker thread of its own, so its CPU time (parsing, planning, writing
 * lineage batches) stays off the event loop that runs the pipeline.
 */
export async function connectPglite(
  dataDir: string,
  options: { worker?: boolean } = {},
): Promise<DatabaseHandles> {
  const dir = resolve(dataDir, "pglite");
  if (openPgliteDirs.has(dir)) {
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] the embedded PGlite database in ${dir} is already open in this process. ` +
        "Share the LineageDatabase returned by the first openLineageDatabase call, or close it first.",
    );
  }
  const onThisThread = options.worker === false;
  const PGliteClass = onThisThread ? await loadPglite() : undefined;
  if (!onThisThread) checkPgliteInstalled();
  openPgliteDirs.add(dir);
  let pglite: PGlite;
  let runner: LineageSqlRunner;
  try {
    await mkdir(dir, { recursive: true });
    // A new database is a copy of the template (made once, in a child process): initdb never runs
    // on the thread that runs pipelines.
    const templateRoot = await pgliteTemplateRoot();
    if (templateRoot !== undefined) await seedFromTemplate(dir, templateRoot, initializeInChildProcess);
    // Without a template, the database is still made in a child process: initdb on PGlite's worker
    // thread held this thread's event loop too (stalls of ~450 ms in `factflow run`).
    else if (await isEmptyDir(dir)) await initializeInChildProcess(dir);
    if (PGliteClass !== undefined) {
      pglite = await PGliteClass.create(dir, {
        startParams: [...PGliteClass.defaultStartParams, ...(await pgliteSettings(dir))],
        initDbStartParams: [...PGLITE_INITDB_ARGS],
      });
      runner = createPgliteSqlRunner(pglite);
    } else {
      const client = await PgliteWorkerClient.open(dir);
      // The client offers the part of PGlite's interface Kysely's dialect uses.
      pglite = client as unknown as PGlite;
      runner = createPgliteWorkerSqlRunner(client);
    }
  } catch (error) {
    openPgliteDirs.delete(dir);
    throw new FactflowError(
      "lineage_error",
      `[factflow/lineage] cannot open the embedded PGlite database in ${dir}: ${describeConnectError(error)}. ` +
        "Check that the directory is writable and not used by another Factflow process, or set DATABASE_URL.",
      { cause: error },
    );
  }
  // One PGlite instance serves both handles (it is single-connection); the lineage writer still
  // keeps its own queue. Kysely must not close the shared instance: close() does it once.
  const db = new Kysely<LineageDatabaseSchema>({ dialect: new PGliteDialect({ pglite }) });
  const lineageDb = new Kysely<LineageDatabaseSchema>({ dialect: new PGliteDialect({ pglite }) });
  return {
    dialect: "pglite",
    db,
    lineageDb,
    writer: runner,
    location: dir,
    async close() {
      try {
        if (!pglite.closed) await pglite.close();
      } finally {
        openPgliteDirs.delete(dir);
      }
    },
  };
}
