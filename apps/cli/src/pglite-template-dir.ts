import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** The variable the lineage package reads (docs/lineage.md): where new PGlite databases are copied from. */
export const PGLITE_TEMPLATE_ENV = "FACTFLOW_PGLITE_TEMPLATE_DIR";

/**
 * Points {@link PGLITE_TEMPLATE_ENV} at this installation's cache (`node_modules/.cache/factflow` of
 * the CLI package) unless the variable is set (an empty value turns templates off). Skipped when
 * that directory cannot be created, e.g. a read-only global install: new databases then run
 * `initdb` as before.
 */
export function useDefaultPgliteTemplateDir(env: NodeJS.ProcessEnv = process.env): void {
  if (env[PGLITE_TEMPLATE_ENV] !== undefined) return;
  const dir = fileURLToPath(new URL("../node_modules/.cache/factflow", import.meta.url));
  try {
    mkdirSync(dir, { recursive: true });
  } catch {
    return;
  }
  env[PGLITE_TEMPLATE_ENV] = dir;
}
