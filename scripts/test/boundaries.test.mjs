// Proves that the import-boundary check of `pnpm lint` catches violations. The workspace's sources and
// configs are copied into temporary directories (node_modules are linked, not copied), one violation is
// planted per copy, and the exact depcruise command of the root package.json's "lint" script runs on it
// (for computed import() specifiers: Biome with the plugin scripts/biome/no-computed-import.grit). The
// real working tree is never touched.
import { execFile } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, it } from "vitest";

const execFileAsync = promisify(execFile);
const repo = fileURLToPath(new URL("../../", import.meta.url));
const bin = join(repo, "node_modules", ".bin");

const lintScript = JSON.parse(readFileSync(join(repo, "package.json"), "utf8")).scripts.lint;
const depcruiseCommand = lintScript
  .split("&&")
  .map((part) => part.trim())
  .find((part) => /^depcruise\s/.test(part));

const ROOT_FILES = [
  "package.json",
  "pnpm-workspace.yaml",
  ".dependency-cruiser.cjs",
  "biome.json",
  "tsconfig.base.json",
  "vitest.shared.ts",
  "tsup.base.ts",
];
const TREES = ["packages", "apps", "bench", "examples", "scripts/biome"];
const SKIPPED = new Set(["dist", "coverage", ".turbo", ".factflow", ".git"]);

/** Copies a source tree; node_modules folders are recreated from their (relative) pnpm symlinks. */
function copyTree(from, to) {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    // `_tmp_*`: what `pnpm pack` (pack.test.mjs, running beside this file) writes and removes.
    if (SKIPPED.has(entry.name) || entry.name.startsWith("_tmp_")) continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    try {
      if (entry.name === "node_modules") linkNodeModules(source, target);
      else if (entry.isDirectory()) copyTree(source, target);
      else if (entry.isFile()) cpSync(source, target);
    } catch (error) {
      // A file another test removed between the listing and the copy is not part of the source.
      if (error.code !== "ENOENT") throw error;
    }
  }
}

/**
 * A package's node_modules holds relative symlinks: workspace packages point at sibling folders (so, in
 * the copy, at the copies), third-party ones into the root node_modules/.pnpm (linked to the real one).
 */
function linkNodeModules(from, to) {
  mkdirSync(to, { recursive: true });
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else if (entry.isDirectory() && entry.name.startsWith("@")) linkNodeModules(source, target);
  }
}

async function sh(command, cwd) {
  const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: "1", FORCE_COLOR: "0" };
  try {
    const { stdout, stderr } = await execFileAsync("sh", ["-c", command], { cwd, env, maxBuffer: 32 << 20 });
    return { code: 0, output: `${stdout}${stderr}` };
  } catch (error) {
    return { code: error.code ?? 1, output: `${error.stdout ?? ""}${error.stderr ?? ""}` };
  }
}

const copies = [];

/** A fresh copy of the workspace's sources and configs; node_modules linked to the real ones. */
function makeCopy() {
  const copy = mkdtempSync(join(tmpdir(), "factflow-boundaries-"));
  copies.push(copy);
  for (const file of ROOT_FILES) cpSync(join(repo, file), join(copy, file));
  for (const tree of TREES) copyTree(join(repo, tree), join(copy, tree));
  symlinkSync(join(repo, "node_modules"), join(copy, "node_modules"));
  return copy;
}

/** Runs `command` in a fresh copy where `line` has been appended to `file`. */
function withPlanted(file, line, command) {
  const copy = makeCopy();
  appendFileSync(join(copy, file), `\n${line}\n`);
  return sh(command, copy);
}

afterAll(() => {
  for (const copy of copies) rmSync(copy, { recursive: true, force: true });
});

// Each case runs in its own copy, so the cases (each a depcruise or biome process) run concurrently.
describe.concurrent("import boundaries (dependency-cruiser, as run by pnpm lint)", () => {
  it("finds the depcruise command in the lint script", ({ expect }) => {
    expect(depcruiseCommand, `no "depcruise ..." step in the lint script: ${lintScript}`).toBeDefined();
  });

  it("passes on a clean copy of the workspace", async ({ expect }) => {
    const { code, output } = await sh(depcruiseCommand, makeCopy());
    expect(output).toContain("no dependency violations found");
    expect(code).toBe(0);
  });

  const violations = [
    {
      name: "a relative import of another package's source",
      file: "packages/lineage/src/index.ts",
      line: 'import "../../engine/src/index.js";',
      reports: [
        "error no-relative-import-across-packages: packages/lineage/src/index.ts → packages/engine/src/index.ts",
        "error lineage-storage-adapters-import-only-protocols: packages/lineage/src/index.ts → packages/engine/src/index.ts",
      ],
    },
    {
      name: "amqplib imported in packages/protocols/src",
      file: "packages/protocols/src/index.ts",
      line: 'export type { Channel as PlantedChannel } from "amqplib";',
      reports: [
        "error protocols-third-party: packages/protocols/src/index.ts → amqplib",
        "error broker-clients-only-in-providers: packages/protocols/src/index.ts → amqplib",
      ],
    },
    {
      name: "kysely imported in packages/engine/src",
      file: "packages/engine/src/index.ts",
      line: 'export { sql as plantedSql } from "kysely";',
      reports: [
        "error engine-third-party: packages/engine/src/index.ts → kysely",
        "error database-libraries-only-in-lineage: packages/engine/src/index.ts → kysely",
      ],
    },
    {
      name: "@factflow/server imported in packages/runtime/src",
      file: "packages/runtime/src/index.ts",
      line: 'export type { AppType as PlantedApp } from "@factflow/server";',
      reports: ["error runtime-imports-no-app: packages/runtime/src/index.ts → @factflow/server"],
    },
    {
      name: "a template-literal dynamic import of @factflow/engine in packages/protocols/src",
      file: "packages/protocols/src/index.ts",
      line: "export const plantedLoad = () => import(`@factflow/engine`);",
      reports: [
        "error protocols-imports-no-workspace-package: packages/protocols/src/index.ts → @factflow/engine",
      ],
    },
  ];

  for (const violation of violations) {
    it(`reports ${violation.name}`, async ({ expect }) => {
      const { code, output } = await withPlanted(violation.file, violation.line, depcruiseCommand);
      for (const report of violation.reports) expect(output).toContain(report);
      expect(code).not.toBe(0);
    });
  }
});

describe.concurrent("computed import() in a package's src (biome plugin scripts/biome/no-computed-import.grit)", () => {
  const message = "import() with a computed specifier";
  const lint = (file) => `biome lint --vcs-enabled=false --max-diagnostics=none ${file}`;

  it("reports a template-literal import() with a placeholder in packages/protocols/src", async ({
    expect,
  }) => {
    const file = "packages/protocols/src/index.ts";
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the planted source is a template literal
    const planted = "export const plantedLoad = (name: string) => import(`@factflow/${name}`);";
    const { code, output } = await withPlanted(file, planted, lint(file));
    expect(output).toContain(message);
    expect(output).toContain(file);
    expect(code).not.toBe(0);
  });

  it("reports import(variable) in packages/storage/src", async ({ expect }) => {
    const file = "packages/storage/src/index.ts";
    const planted = "export const plantedLoad = (name: string) => import(name);";
    const { output } = await withPlanted(file, planted, lint(file));
    expect(output).toContain(message);
  });

  it("leaves literal specifiers, apps/* and the engine's configured module loader alone", async ({
    expect,
  }) => {
    const { output } = await sh(
      lint("packages/protocols/src packages/engine/src/config/adapter-registry.ts apps/server/src"),
      makeCopy(),
    );
    expect(output).not.toContain(message);
  });
});
