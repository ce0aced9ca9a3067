import { realpathSync } from "node:fs";
import { createRequire } from "node:module";
import { isAbsolute, join, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";

/**
 * Where adapter modules may be imported from. A pipeline config only *names* modules; the
 * application decides, when it starts, which of those names may run. Anything else is refused
 * before it is imported: URLs of every scheme (`data:`, `http:`, `file:`, `node:`), paths outside
 * the directories, and packages not listed.
 */
export interface ModuleAccess {
  /** Directories whose files (symlinks resolved) may be imported. */
  readonly directories: readonly string[];
  /** Package names (`my-adapters`, `@acme/adapters`) whose modules may be imported. */
  readonly packages: readonly string[];
  /**
   * How an operator widens the allowlist, appended to every refusal (e.g. "set
   * FACTFLOW_ADAPTER_DIRS"). @default "pass moduleAccess to createEngine"
   */
  readonly hint?: string;
}

/** Nothing may be imported: the default of `createEngine`. */
export const NO_MODULE_ACCESS: ModuleAccess = Object.freeze({ directories: [], packages: [] });

/** A module name checked against a `ModuleAccess`: the URL to import, or why it is refused. */
export type ModuleCheck =
  | { readonly ok: true; readonly url: string }
  | { readonly ok: false; readonly message: string };

const URL_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const PACKAGE_NAME = /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*/i;

/**
 * Checks one `adapter_modules` entry. Relative entries resolve against `baseDir`. Files must exist
 * and lie inside an allowed directory once symlinks are resolved; packages must be listed by name
 * (their subpaths are allowed too).
 */
export function checkModule(specifier: string, baseDir: string, access: ModuleAccess): ModuleCheck {
  const refuse = (why: string): ModuleCheck => ({
    ok: false,
    message: `adapter module "${clip(specifier)}" is refused: ${why}. ${allowedText(access)}`,
  });
  if (URL_SCHEME.test(specifier)) return refuse("URLs (data:, http:, file:, node: ...) are never imported");
  if (specifier.startsWith(".") || isAbsolute(specifier)) {
    const path = resolve(baseDir, specifier);
    let real: string;
    try {
      real = realpathSync(path);
    } catch {
      return refuse(`the file ${path} does not exist`);
    }
    const inside = access.directories.some((dir) => isInside(real, dir));
    return inside
      ? { ok: true, url: pathToFileURL(real).href }
      : refuse(`${real} is outside the allowed directories`);
  }
  const name = PACKAGE_NAME.exec(specifier)?.[0];
  if (name === undefined || (specifier.length > name.length && specifier[name.length] !== "/"))
    return refuse("it is neither a path (./x.mjs) nor a package name");
  if (!access.packages.includes(name)) return refuse(`package "${name}" is not in the allowed packages`);
  try {
    // Prefer the copy installed next to the config; fall back to the engine's own resolution.
    return { ok: true, url: pathToFileURL(createRequire(join(baseDir, "noop.js")).resolve(specifier)).href };
  } catch {
    return { ok: true, url: specifier };
  }
}

function isInside(file: string, dir: string): boolean {
  let root: string;
  try {
    root = realpathSync(dir);
  } catch {
    return false;
  }
  return file.startsWith(root.endsWith(sep) ? root : `${root}${sep}`);
}

function allowedText(access: ModuleAccess): string {
  const dirs = access.directories.length === 0 ? "none" : access.directories.join(", ");
  const packages = access.packages.length === 0 ? "none" : access.packages.join(", ");
  return `Allowed directories: ${dirs}; allowed packages: ${packages}; to allow more, ${access.hint ?? "pass moduleAccess to createEngine"}`;
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
