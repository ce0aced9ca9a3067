import { accessSync, constants, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The variable the lineage package reads (docs/lineage.md): where new PGlite databases are copied from. */
export const PGLITE_TEMPLATE_ENV = "FACTFLOW_PGLITE_TEMPLATE_DIR";

/** This installation's cache: `node_modules/.cache/factflow` of the CLI package. */
const INSTALLATION_CACHE = fileURLToPath(new URL("../node_modules/.cache/factflow", import.meta.url));

/**
 * Points {@link PGLITE_TEMPLATE_ENV} at `dir` (this installation's cache) unless the variable is set
 * (an empty value turns templates off). Skipped when `dir` cannot be created or written, e.g. a
 * read-only global install or a container whose code belongs to another user: new databases then
 * run `initdb` as before, instead of failing on a template they cannot make.
 */
export function useDefaultPgliteTemplateDir(
  env: NodeJS.ProcessEnv = process.env,
  dir: string = INSTALLATION_CACHE,
): void {
  if (env[PGLITE_TEMPLATE_ENV] !== undefined) return;
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch {
    return;
  }
  env[PGLITE_TEMPLATE_ENV] = dir;
}
