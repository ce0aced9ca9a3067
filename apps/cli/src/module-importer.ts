import { createHash } from "node:crypto";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { keepLocations } from "../launch/keep-locations.mjs";

const TYPESCRIPT = /\.[cm]?tsx?$/;

/**
 * Imports an allowed adapter module. A TypeScript module that Node cannot import by itself (no
 * `tsx` loaded, as in the workspace's bundled `factflow` or the built CLI) is compiled first with
 * esbuild, in esbuild's own process, so the event loop never waits for the compilation: its own
 * files and the workspace's TypeScript sources go into one module, whose files keep their
 * `import.meta.url`; every package under node_modules is imported from where the module's directory
 * resolves it, as Node would.
 */
export async function importModule(url: string): Promise<unknown> {
  try {
    return await import(url);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ERR_UNKNOWN_FILE_EXTENSION" || !TYPESCRIPT.test(url))
      throw error;
    return await import(await compileModule(fileURLToPath(url)));
  }
}

/**
 * Compiles a TypeScript module into one ES module in this installation's cache; returns its URL.
 * The compiled module is used again while none of the files that went into it changed.
 */
async function compileModule(path: string): Promise<string> {
  const conditions = sourceConditions();
  const key = createHash("sha256")
    .update(`${path}\n${conditions.join(",")}`)
    .digest("hex")
    .slice(0, 20);
  for (const dir of CACHE_DIRS) {
    const compiled = await freshCompiled(join(dir, `${key}.json`));
    if (compiled !== undefined) return compiled;
  }
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [path],
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    conditions,
    write: false,
    metafile: true,
    sourcemap: "inline",
    logLevel: "silent",
    plugins: [keepLocations(isCompiledIn)],
  });
  const code = result.outputFiles[0]?.contents;
  if (code === undefined) throw new Error(`esbuild wrote nothing for ${path}`);
  const inputs = Object.keys(result.metafile.inputs).map((input) => resolve(input));
  const files = Object.fromEntries(
    await Promise.all(inputs.map(async (input) => [input, await fingerprint(input)] as const)),
  );
  const name = `${key}-${createHash("sha256").update(code).digest("hex").slice(0, 12)}.mjs`;
  for (const dir of CACHE_DIRS) {
    try {
      await mkdir(dir, { recursive: true });
      await writeAtomically(join(dir, name), code);
      await writeAtomically(join(dir, `${key}.json`), JSON.stringify({ module: name, files }));
      return pathToFileURL(join(dir, name)).href;
    } catch {
      // A read-only installation: the temporary directory instead.
    }
  }
  throw new Error(`cannot write the compiled ${path} (in ${CACHE_DIRS.join(" or ")})`);
}

/** The module's own files and TypeScript anywhere are compiled in; JavaScript packages stay where they are. */
function isCompiledIn(path: string): boolean {
  return !path.includes("/node_modules/") || TYPESCRIPT.test(path);
}

const CACHE_DIRS = [
  fileURLToPath(new URL("../node_modules/.cache/factflow/modules", import.meta.url)),
  join(tmpdir(), "factflow-modules"),
];

/** The compiled module a stamp names, if every file that went into it is unchanged. */
async function freshCompiled(stampPath: string): Promise<string | undefined> {
  let stamp: { module?: unknown; files?: Record<string, string> };
  try {
    stamp = JSON.parse(await readFile(stampPath, "utf8"));
  } catch {
    return undefined;
  }
  if (typeof stamp.module !== "string" || stamp.files === undefined) return undefined;
  const files = Object.entries(stamp.files);
  const now = await Promise.all(files.map(([file]) => fingerprint(file)));
  if (files.some(([, was], i) => now[i] !== was)) return undefined;
  const module = join(dirname(stampPath), stamp.module);
  return (await fingerprint(module)) === "missing" ? undefined : pathToFileURL(module).href;
}

async function fingerprint(path: string): Promise<string> {
  try {
    const s = await stat(path);
    return `${s.size}:${s.mtimeMs}`;
  } catch {
    return "missing";
  }
}

async function writeAtomically(path: string, contents: string | Uint8Array): Promise<void> {
  const staging = `${path}.${process.pid}.tmp`;
  await writeFile(staging, contents);
  await rename(staging, path);
}

/** The custom conditions this process resolves with (`--conditions=factflow-source` in the workspace). */
function sourceConditions(): string[] {
  const conditions: string[] = [];
  const args = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? "").split(/\s+/)];
  for (const [i, arg] of args.entries()) {
    const inline = /^(?:--conditions|-C)=(.+)$/.exec(arg)?.[1];
    if (inline !== undefined) conditions.push(inline);
    else if ((arg === "--conditions" || arg === "-C") && args[i + 1] !== undefined)
      conditions.push(args[i + 1] as string);
  }
  return conditions;
}
