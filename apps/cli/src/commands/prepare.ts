import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CliContext } from "../context.js";
import { PGLITE_TEMPLATE_ENV } from "../pglite-template-dir.js";

/**
 * `factflow prepare`: makes the embedded database template (PostgreSQL's `initdb`, once) in the
 * template directory, so that every later new data directory starts as a copy of it. The root
 * `postinstall` runs it; a Docker build can too. Opening a throw-away database in a temporary
 * directory is what makes the template: the lineage package builds it on the first open.
 */
export async function prepareCommand(ctx: CliContext): Promise<number> {
  const templates = process.env[PGLITE_TEMPLATE_ENV];
  if (templates === undefined || templates === "") {
    ctx.output.err(
      `factflow prepare: no template directory (${PGLITE_TEMPLATE_ENV} is empty, or the default one is not writable); nothing to prepare`,
    );
    return 1;
  }
  const started = Date.now();
  const scratch = await mkdtemp(join(tmpdir(), "factflow-prepare-"));
  try {
    const { openLineageDatabase } = await import("@factflow/lineage");
    const db = await openLineageDatabase({ dataDir: scratch });
    await db.close();
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  ctx.output.out(
    `factflow prepare: embedded database template ready in ${templates} (${Date.now() - started} ms)`,
  );
  return 0;
}
