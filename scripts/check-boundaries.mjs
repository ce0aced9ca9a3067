#!/usr/bin/env node
// Enforces the import boundaries of ARCHITECTURE.md: which workspace package may import which, in
// package.json dependencies and in the import statements of src/. Also rejects dependency cycles and
// deep imports into another package's internals. Exit 1 with one line per violation.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const dirs = ["packages", "packages/infra", "apps"].flatMap((d) =>
  readdirSync(join(root, d))
    .map((n) => join(root, d, n))
    .filter((p) => statSync(p).isDirectory() && safeRead(join(p, "package.json"))),
);

function safeRead(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** Who may import whom (runtime dependencies and src imports). Dev dependencies are free for tests. */
const allowed = {
  "@factflow/protocols": [],
  "@factflow/infra-testkit": ["@factflow/protocols"],
  "@factflow/infra-embedded": ["@factflow/protocols"],
  "@factflow/infra-rabbitmq": ["@factflow/protocols"],
  "@factflow/infra-artemis": ["@factflow/protocols"],
  "@factflow/infra-pulsar": ["@factflow/protocols"],
  "@factflow/engine": ["@factflow/protocols"],
  "@factflow/lineage": ["@factflow/protocols"],
  "@factflow/storage": ["@factflow/protocols"],
  "@factflow/adapters": ["@factflow/protocols"],
  "@factflow/server": "*",
  "@factflow/cli": "*",
};

const problems = [];
const graph = new Map();
for (const dir of dirs) {
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const rule = allowed[pkg.name];
  if (rule === undefined) {
    problems.push(`${pkg.name}: not listed in scripts/check-boundaries.mjs; add its allowed imports there`);
    continue;
  }
  const deps = Object.keys(pkg.dependencies ?? {}).filter((d) => d.startsWith("@factflow/"));
  graph.set(pkg.name, deps);
  for (const dep of deps) {
    if (rule !== "*" && !rule.includes(dep))
      problems.push(`${pkg.name}: may not depend on ${dep} (ARCHITECTURE.md)`);
  }
  for (const file of walk(join(dir, "src"))) {
    const text = readFileSync(file, "utf8");
    for (const match of text.matchAll(/(?:from|import)\s*\(?\s*["'](@factflow\/[^"']+)["']/g)) {
      const spec = match[1];
      const target = spec.split("/").slice(0, 2).join("/");
      const where = relative(root, file);
      if (spec !== target) problems.push(`${where}: deep import "${spec}"; import from "${target}" instead`);
      if (target === pkg.name) continue;
      if (rule !== "*" && !rule.includes(target))
        problems.push(`${where}: imports ${target}, which ${pkg.name} may not`);
      if (!deps.includes(target))
        problems.push(`${where}: imports ${target} without a dependency in package.json`);
    }
  }
}

function* walk(dir) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (/\.(ts|mts|js|mjs)$/.test(entry.name)) yield path;
  }
}

// Cycle check over runtime dependencies.
const state = new Map();
function visit(name, stack) {
  if (state.get(name) === "done") return;
  if (state.get(name) === "active") {
    problems.push(`dependency cycle: ${[...stack.slice(stack.indexOf(name)), name].join(" -> ")}`);
    return;
  }
  state.set(name, "active");
  for (const dep of graph.get(name) ?? []) visit(dep, [...stack, name]);
  state.set(name, "done");
}
for (const name of graph.keys()) visit(name, []);

if (problems.length > 0) {
  console.error(`[factflow/boundaries] ${problems.length} import boundary violation(s):`);
  for (const p of problems) console.error(`  - ${p}`);
  process.exit(1);
}
console.log(`[factflow/boundaries] ${graph.size} packages checked, boundaries hold`);
