/**
 * The esbuild plugin both of the CLI's compilations use (the workspace bundle in `bundle.mjs`, and
 * a TypeScript adapter module in `src/module-importer.ts`). Plain JavaScript: the launcher loads it
 * before any TypeScript can run.
 */
import { readFile } from "node:fs/promises";
import { isBuiltin } from "node:module";
import { dirname, isAbsolute } from "node:path";
import { pathToFileURL } from "node:url";

const TYPESCRIPT = /\.[cm]?tsx?$/;

/**
 * esbuild keeps each bundled module where it was: `import.meta.url` (and `dirname`/`filename`) is
 * the source file's own, so `createRequire(import.meta.url)` and paths next to a source file resolve
 * as they do from source, and a package import that is not bundled (`isBundled` false) becomes an
 * absolute file URL resolved from the importing file, as Node would resolve it there.
 *
 * @param {(path: string, args: { path: string; importer: string }) => boolean} isBundled
 */
export function keepLocations(isBundled) {
  return {
    name: "factflow-keep-locations",
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === "inner" || isAbsolute(args.path)) return undefined;
        if (isBuiltin(args.path)) return { path: args.path, external: true };
        const found = await build.resolve(args.path, {
          kind: args.kind,
          importer: args.importer,
          resolveDir: args.resolveDir,
          pluginData: "inner",
        });
        if (found.errors.length > 0) {
          // An optional package a bundled package requires in a try block (pg's pg-native).
          if (args.importer.includes("/node_modules/")) return { path: args.path, external: true };
          return { errors: found.errors };
        }
        if (found.external) return { path: found.path, external: true };
        if (isBundled(found.path, args)) return { path: found.path };
        return { path: pathToFileURL(found.path).href, external: true };
      });
      build.onLoad({ filter: /\.[cm]?[jt]sx?$/ }, async (args) => {
        const typescript = TYPESCRIPT.test(args.path);
        if (args.path.includes("/node_modules/") && !typescript) return undefined;
        const source = await readFile(args.path, "utf8");
        const jsx = args.path.endsWith("x");
        const loader = typescript ? (jsx ? "tsx" : "ts") : jsx ? "jsx" : "js";
        return { contents: withOwnLocation(source, args.path), loader, resolveDir: dirname(args.path) };
      });
    },
  };
}

/** `import.meta.url`, `.dirname` and `.filename` of `path` written out (not where they are quoted). */
export function withOwnLocation(source, path) {
  const values = { url: pathToFileURL(path).href, dirname: dirname(path), filename: path };
  return source.replace(/(?<!["'`])\bimport\.meta\.(url|dirname|filename)\b/g, (_, key) =>
    JSON.stringify(values[key]),
  );
}
