import { randomBytes } from "node:crypto";
import { constants, readFileSync } from "node:fs";
import { access, cp, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { PGLITE_LAYOUT } from "./pglite-settings.js";

/**
 * The environment variable naming a directory of PGlite templates. A new embedded database is a
 * copy of a template made once per PGlite version (and database layout) (PostgreSQL's `initdb`
 * takes 3–20 s and ~750 MB of memory; a copy of its 39 MB result takes a fraction of a second).
 * Unset: the user's cache directory ({@link pgliteTemplateRoot}); empty: no template.
 */
export const PGLITE_TEMPLATE_ENV = "FACTFLOW_PGLITE_TEMPLATE_DIR";

/**
 * The directory templates are kept in: {@link PGLITE_TEMPLATE_ENV} when set (undefined when it is
 * empty), else `factflow/pglite-templates` in the user's cache directory (`XDG_CACHE_HOME`, or
 * `~/.cache`). Undefined too when that directory cannot be created or written (a read-only home):
 * a new database is then made in place, still off the calling thread.
 */
export async function pgliteTemplateRoot(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  const named = env[PGLITE_TEMPLATE_ENV];
  if (named !== undefined) return named === "" ? undefined : named;
  const cache =
    env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== ""
      ? env.XDG_CACHE_HOME
      : join(homedir(), ".cache");
  const root = join(cache, "factflow", "pglite-templates");
  try {
    await mkdir(root, { recursive: true });
    await access(root, constants.W_OK);
    return root;
  } catch {
    return undefined;
  }
}

/** The installed PGlite's version: a template is only valid for the version that wrote it. */
function pgliteVersion(): string {
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  // The entry is `<package>/dist/index.cjs`; its package.json is not exported, so read it by path.
  const manifest = JSON.parse(readFileSync(join(dirname(entry), "..", "package.json"), "utf8")) as {
    version?: unknown;
  };
  return typeof manifest.version === "string" ? manifest.version : "unknown";
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** True when `path` holds no files (or does not exist). */
export async function isEmptyDir(path: string): Promise<boolean> {
  return readdir(path).then(
    (names) => names.length === 0,
    () => true,
  );
}

/**
 * Fills the empty directory `dir` with a copy of the template under `templateRoot`, creating the
 * template first when it does not exist (with `initialize`, which must leave a closed database in
 * the directory it is given). Returns false, touching nothing, when `dir` already holds files.
 *
 * Several processes may do this at once: each builds its template candidate in a directory of its
 * own and renames it into place, so a template is visible only when complete; the loser of the
 * rename deletes its candidate and copies the winner's.
 */
export async function seedFromTemplate(
  dir: string,
  templateRoot: string,
  initialize: (dir: string) => Promise<void>,
): Promise<boolean> {
  if (!(await isEmptyDir(dir))) return false;
  const template = join(resolve(templateRoot), `pglite-${pgliteVersion()}-${PGLITE_LAYOUT}`);
  if (!(await exists(join(template, "PG_VERSION")))) {
    const candidate = `${template}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      await mkdir(candidate, { recursive: true });
      await initialize(candidate);
      await rename(candidate, template).catch(async (error: NodeJS.ErrnoException) => {
        // Another process's template won the race: use that one.
        if (error.code !== "EEXIST" && error.code !== "ENOTEMPTY") throw error;
      });
    } finally {
      await rm(candidate, { recursive: true, force: true });
    }
  }
  await cp(template, dir, { recursive: true, force: false, errorOnExist: true });
  return true;
}
