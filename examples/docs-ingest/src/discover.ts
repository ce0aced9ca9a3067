import { readdir, stat } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { AdapterDefinition, JsonObject } from "@factflow/protocols";

/** The example's directory (where pipeline.yaml is), for configs whose loader gives no `baseDir`. */
const EXAMPLE_DIR = fileURLToPath(new URL("..", import.meta.url));

/** Every `*.md` under `root` (a file or a directory), skipping dot-directories and node_modules. */
export async function findMarkdown(root: string): Promise<string[]> {
  const info = await stat(root).catch(() => undefined);
  if (info === undefined) return [];
  if (info.isFile()) return root.endsWith(".md") ? [root] : [];
  const found: string[] = [];
  for (const entry of await readdir(root, { withFileTypes: true })) {
    if (entry.name.startsWith(".") || entry.name === "node_modules") continue;
    const path = join(root, entry.name);
    if (entry.isDirectory()) found.push(...(await findMarkdown(path)));
    else if (entry.isFile() && entry.name.endsWith(".md")) found.push(path);
  }
  return found.sort();
}

function stringList(value: unknown): string[] | undefined {
  return Array.isArray(value) && value.every((v) => typeof v === "string") ? (value as string[]) : undefined;
}

/**
 * `docs_discover`: finds Markdown files and fans out one message per file.
 *
 * config: `roots` (paths relative to the pipeline file's directory), `fallback` (used when the roots hold fewer
 * than `min_files` files, so the example works while `docs/` is still nearly empty).
 * The execution input may override `roots` (absolute, or relative to the working directory).
 */
export const discover: AdapterDefinition = {
  type: "docs_discover",
  description: "Finds Markdown files under the configured roots and emits one message per file",
  validateConfig(config: JsonObject) {
    return config.roots === undefined || stringList(config.roots) !== undefined
      ? []
      : ["roots must be a list of paths"];
  },
  create(config, context) {
    const base = context.baseDir ?? EXAMPLE_DIR;
    const configured = (stringList(config.roots) ?? ["."]).map((p) => resolve(base, p));
    const fallback = typeof config.fallback === "string" ? resolve(base, config.fallback) : undefined;
    const minFiles = typeof config.min_files === "number" ? config.min_files : 1;
    return {
      type: "docs_discover",
      async process(ctx) {
        const given = stringList((ctx.message as JsonObject | null)?.roots);
        const roots = given === undefined ? configured : given.map((p) => resolve(p));
        // Names are relative to their root, so they (and the flaky step's choices) do not depend on
        // the working directory.
        const named = async (root: string) =>
          (await findMarkdown(root)).map((path) => ({
            path,
            name: join(basename(root), relative(root, path)),
          }));
        let files = (await Promise.all(roots.map(named))).flat();
        if (given === undefined && files.length < minFiles && fallback !== undefined) {
          ctx.logger.info("few Markdown files under the roots; adding the bundled samples", {
            found: files.length,
          });
          files = [...files, ...(await named(fallback))];
        }
        const seen = new Set<string>();
        const unique = files.filter((f) => !seen.has(f.path) && seen.add(f.path));
        return { data: null, emitMessages: unique.map((file) => ({ body: file })) };
      },
    };
  },
};
