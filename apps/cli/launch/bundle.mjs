/**
 * The workspace's `factflow` command runs from one esbuild bundle of the CLI and every workspace
 * package it imports (their TypeScript sources, through the `factflow-source` condition), kept in
 * `apps/cli/node_modules/.cache/factflow/bundle/`. Loading the sources through `tsx` instead holds
 * the event loop for hundreds of milliseconds while the process starts (its loader thread starts
 * synchronously, and its CommonJS hook transforms on the main thread).
 *
 * The bundle is never run stale: `current.json` lists every file that went into it (sources, the
 * workspace's package.json files, this file, the install's `.modules.yaml`) with its size and
 * modification time, and any difference rebuilds it first (esbuild runs in its own process, so a
 * rebuild does not hold the event loop either). Written in plain JavaScript: it runs before any
 * TypeScript can load.
 */
import { rmSync, writeFileSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { isBuiltin } from "node:module";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { keepLocations } from "./keep-locations.mjs";

const CLI_DIR = fileURLToPath(new URL("..", import.meta.url));
const ROOT = resolve(CLI_DIR, "../..");
const ENTRY = join(CLI_DIR, "src/bin.ts");
/** Where the bundle lives: this installation's cache, beside the PGlite template. */
export const BUNDLE_DIR = join(CLI_DIR, "node_modules/.cache/factflow/bundle");
const STAMP = join(BUNDLE_DIR, "current.json");
/** Files outside the bundle's inputs whose change may change the bundle or its imports' targets. */
const EXTRA_WATCHED = [fileURLToPath(import.meta.url), join(ROOT, "node_modules/.modules.yaml")];
/**
 * Old builds are removed once this old and no live process runs on them: a process started on one
 * (a `factflow serve`) may still import its chunks, and marks the build while it runs ({@link
 * markInUse}).
 */
const KEEP_OLD_BUILDS_MS = 7 * 24 * 3600 * 1000;
const IN_USE_PREFIX = "in-use-";

/** Marks the build in `dir` as used by this process until it exits, so no prune removes it meanwhile. */
export function markInUse(dir) {
  const marker = join(dir, `${IN_USE_PREFIX}${process.pid}`);
  try {
    writeFileSync(marker, "");
  } catch {
    return;
  }
  process.on("exit", () => rmSync(marker, { force: true }));
}

/** True while a process that marked the build in `dir` still runs (a marker of a dead one is ignored). */
export async function inUse(dir) {
  for (const name of await readdir(dir).catch(() => [])) {
    if (!name.startsWith(IN_USE_PREFIX)) continue;
    const pid = Number(name.slice(IN_USE_PREFIX.length));
    try {
      process.kill(pid, 0);
      return true;
    } catch (error) {
      // EPERM: the process lives, under another user.
      if (error?.code === "EPERM") return true;
    }
  }
  return false;
}

/** Size and modification time: what tells a changed file here. */
async function fingerprint(path) {
  try {
    const s = await stat(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return "missing";
  }
}

/** The entry file of the current bundle, or undefined when there is none or any input changed. */
export async function currentBundle() {
  let stamp;
  try {
    stamp = JSON.parse(await readFile(STAMP, "utf8"));
  } catch {
    return undefined;
  }
  const files = Object.entries(stamp.files ?? {});
  if (files.length === 0 || typeof stamp.entry !== "string") return undefined;
  const now = await Promise.all(files.map(([path]) => fingerprint(path)));
  if (files.some(([, was], i) => now[i] !== was)) return undefined;
  const entry = join(BUNDLE_DIR, stamp.entry);
  return (await fingerprint(entry)) === "missing" ? undefined : entry;
}

/**
 * Packages bundled with the workspace's code (with everything they import): the ones `factflow run`
 * loads, whose hundreds of files Node would otherwise resolve, read and compile one by one. Every
 * other package stays a module of its own under node_modules (PGlite and esbuild need their files
 * beside them).
 */
const BUNDLED_PACKAGES = new Set(["kysely", "yaml", "pg", "pg-copy-streams", "prom-client", "uuid"]);

/** The workspace's own files, the packages above and whatever bundled packages import. */
function isBundledHere(path, { path: specifier, importer }) {
  if (!path.includes("/node_modules/")) return path.startsWith(ROOT);
  if (importer.includes("/node_modules/")) return true;
  return BUNDLED_PACKAGES.has(/^(@[^/]+\/)?[^/]+/.exec(specifier)?.[0] ?? "");
}

async function workspacePackageDirs() {
  const found = [];
  for (const group of ["apps", "packages", "packages/infra"]) {
    let names = [];
    try {
      names = await readdir(join(ROOT, group));
    } catch {}
    for (const name of names) found.push(join(ROOT, group, name));
  }
  return found;
}

async function workspacePackageJsons() {
  return [
    join(ROOT, "package.json"),
    ...(await workspacePackageDirs()).map((dir) => join(dir, "package.json")),
  ];
}

const PACKAGE_ENTRY = "factflow-package:";

/** The entry point of a bundled package: re-exports it, resolved from a workspace package that depends on it. */
function packageEntries(dirs) {
  return {
    name: "factflow-package-entries",
    setup(build) {
      build.onResolve({ filter: new RegExp(`^${PACKAGE_ENTRY}`) }, (args) => ({
        path: args.path.slice(PACKAGE_ENTRY.length),
        namespace: "factflow-package",
      }));
      build.onLoad({ filter: /.*/, namespace: "factflow-package" }, async (args) => {
        for (const dir of dirs) {
          const found = await build.resolve(args.path, {
            kind: "import-statement",
            resolveDir: dir,
            pluginData: "inner",
          });
          if (found.errors.length === 0)
            return { contents: `export * from ${JSON.stringify(args.path)};`, resolveDir: dir, loader: "js" };
        }
        return { errors: [{ text: `no workspace package depends on ${args.path}` }] };
      });
    },
  };
}

/** Each chunk's static imports, chunks by file name and packages by URL, written beside the chunks. */
export const GRAPH = "graph.json";

function chunkGraph(metafile) {
  const graph = {};
  for (const [path, output] of Object.entries(metafile.outputs)) {
    if (!path.endsWith(".js")) continue;
    graph[basename(path)] = output.imports
      .filter((i) => i.kind === "import-statement" && !isBuiltin(i.path))
      .map((i) => (i.external ? i.path : basename(i.path)));
  }
  return graph;
}

/**
 * Routes the dynamic import of a chunk through `globalThis.__factflowStagedImport` (set by
 * launch/factflow.mjs): it evaluates the packages and chunks the chunk imports one per event-loop
 * turn, deepest first, instead of the whole graph in one synchronous evaluation.
 */
function stageChunkImports(code) {
  return code.replace(
    /\bimport\("\.\/([\w.-]+\.js)"\)/g,
    (_, chunk) => `(globalThis.__factflowStagedImport?.("${chunk}") ?? import("./${chunk}"))`,
  );
}

/** Builds the bundle and makes it current; returns its entry file. */
export async function buildBundle() {
  const esbuild = await import("esbuild");
  const result = await esbuild.build({
    // Each bundled package is an entry point too, so that its code is a chunk of its own, evaluated
    // in an event-loop turn of its own, not part of the chunk of the workspace code that imports it.
    entryPoints: {
      bin: ENTRY,
      ...Object.fromEntries(
        [...BUNDLED_PACKAGES].map((name) => [`package-${name}`, `${PACKAGE_ENTRY}${name}`]),
      ),
    },
    absWorkingDir: ROOT,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    conditions: ["factflow-source"],
    write: false,
    outdir: BUNDLE_DIR,
    metafile: true,
    sourcemap: "linked",
    sourcesContent: false,
    logLevel: "silent",
    plugins: [packageEntries(await workspacePackageDirs()), keepLocations(isBundledHere)],
    // Bundled CommonJS packages require Node's built-in modules.
    banner: {
      js: 'import { createRequire as __factflowRequire } from "node:module"; const require = __factflowRequire(import.meta.url);',
    },
  });
  const { createHash } = await import("node:crypto");
  const graph = chunkGraph(result.metafile);
  const outputs = result.outputFiles.map((file) => ({
    path: file.path,
    contents: file.path.endsWith(".js") ? stageChunkImports(file.text) : file.contents,
  }));
  const hash = createHash("sha256");
  for (const file of outputs) hash.update(file.path).update(file.contents);
  const name = hash.digest("hex").slice(0, 16);
  const dir = join(BUNDLE_DIR, name);
  const staging = `${dir}.${process.pid}.tmp`;
  await rm(staging, { recursive: true, force: true });
  outputs.push({ path: join(BUNDLE_DIR, GRAPH), contents: JSON.stringify(graph) });
  for (const file of outputs) {
    const target = join(staging, relative(BUNDLE_DIR, file.path));
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, file.contents);
  }
  await rename(staging, dir).catch(async (error) => {
    // Another process made the same build first.
    await rm(staging, { recursive: true, force: true });
    if ((await fingerprint(join(dir, "bin.js"))) === "missing") throw error;
  });
  const inputs = Object.keys(result.metafile.inputs)
    .filter((path) => !path.startsWith("file:") && !isBuiltin(path))
    .map((path) => resolve(ROOT, path));
  const watched = [...new Set([...inputs, ...EXTRA_WATCHED, ...(await workspacePackageJsons())])];
  const files = Object.fromEntries(
    await Promise.all(watched.map(async (path) => [path, await fingerprint(path)])),
  );
  const stampTmp = `${STAMP}.${process.pid}.tmp`;
  await writeFile(stampTmp, JSON.stringify({ entry: join(name, "bin.js"), files }));
  await rename(stampTmp, STAMP);
  await pruneOldBuilds(name);
  return join(dir, "bin.js");
}

async function pruneOldBuilds(keep) {
  const now = Date.now();
  for (const name of await readdir(BUNDLE_DIR).catch(() => [])) {
    if (name === keep || name === "current.json") continue;
    const path = join(BUNDLE_DIR, name);
    const s = await stat(path).catch(() => undefined);
    if (s?.isDirectory() && now - s.mtimeMs > KEEP_OLD_BUILDS_MS && !(await inUse(path)))
      await rm(path, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** The current bundle's entry, built first when any of its inputs changed. */
export async function freshBundle() {
  return (await currentBundle()) ?? (await buildBundle());
}
