#!/usr/bin/env node
/**
 * The workspace's `factflow` command (`pnpm factflow`): runs the CLI from its bundle (see
 * bundle.mjs), rebuilt first when a source changed. When the bundle cannot be built (esbuild
 * missing, a source it cannot compile), it runs the TypeScript sources through `tsx` as before, so
 * the command always runs the code in the tree and reports source errors as `tsx` does.
 */
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { freshBundle, GRAPH, markInUse } from "./bundle.mjs";

let entry;
try {
  entry = await freshBundle();
} catch (error) {
  const why = String(error?.message ?? error)
    .split("\n")
    .slice(0, 2)
    .join(" ");
  process.stderr.write(`[factflow] running the sources through tsx: the bundle was not built (${why})\n`);
}
if (entry === undefined) {
  await import("tsx");
  await import("../src/bin.ts");
} else {
  const dir = dirname(entry);
  markInUse(dir);
  const graph = JSON.parse(await readFile(join(dir, GRAPH), "utf8").catch(() => "{}"));
  globalThis.__factflowStagedImport = stagedImport(dir, graph);
  await globalThis.__factflowStagedImport("bin.js");
}

/**
 * Imports a chunk of the bundle after its static imports, each in an event-loop turn of its own,
 * deepest first: evaluating a command's whole module graph (its packages included) at once would
 * hold the event loop for hundreds of milliseconds.
 */
function stagedImport(dir, graph) {
  const done = new Set();
  const urlOf = (name) => (name.startsWith("file:") ? name : pathToFileURL(join(dir, name)).href);
  return async (chunk) => {
    const order = [];
    const seen = new Set();
    const visit = (name) => {
      if (seen.has(name) || done.has(name)) return;
      seen.add(name);
      for (const next of graph[name] ?? []) visit(next);
      order.push(name);
    };
    visit(chunk);
    for (const name of order) {
      await import(urlOf(name));
      done.add(name);
      if (name !== chunk) await new Promise((resolve) => setImmediate(resolve));
    }
    return import(urlOf(chunk));
  };
}
