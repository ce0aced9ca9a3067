// Proves the packages work when published: `pnpm pack` of every public package (publishConfig
// applied, workspace:* replaced by versions), then `npm install` of the tarballs in a scratch project
// outside the workspace, then importing every package there. Workspace packages come from the
// tarballs (npm `overrides` pin them), third-party ones from the npm registry.
//
// Needs built packages (`pnpm build`; CI builds first). Packages without dist/ are built here with
// turbo before packing.
import { execFile } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const repo = fileURLToPath(new URL("../../", import.meta.url));
const MINUTES = 60_000;

/** Every workspace package (public or not), by name. */
function workspacePackages() {
  const dirs = ["packages", "packages/infra", "apps"].flatMap((parent) =>
    readdirSync(join(repo, parent), { withFileTypes: true })
      .filter((d) => d.isDirectory() && existsSync(join(repo, parent, d.name, "package.json")))
      .map((d) => join(repo, parent, d.name)),
  );
  const byName = new Map();
  for (const dir of dirs) {
    const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    byName.set(manifest.name, { dir, manifest });
  }
  return byName;
}

const all = workspacePackages();
const published = [...all.values()].filter((p) => p.manifest.private !== true);

/** The workspace packages a set of packages depends on, transitively (they must be packed too). */
function closure(packages) {
  const seen = new Map();
  const visit = (pkg) => {
    if (seen.has(pkg.manifest.name)) return;
    seen.set(pkg.manifest.name, pkg);
    for (const dep of Object.keys(pkg.manifest.dependencies ?? {})) {
      const inner = all.get(dep);
      if (inner !== undefined) visit(inner);
    }
  };
  for (const pkg of packages) visit(pkg);
  return [...seen.values()];
}

/** Every file an exports map points at (conditions flattened; `null` entries block paths). */
function exportTargets(exports) {
  if (typeof exports === "string") return [exports];
  if (exports === null || typeof exports !== "object") return [];
  return Object.values(exports).flatMap(exportTargets);
}

const scratch = mkdtempSync(join(tmpdir(), "factflow-pack-"));
const tarballs = new Map(); // name → { file, manifest (as packed), files (paths in the tarball) }

beforeAll(async () => {
  const toPack = closure(published);
  const unbuilt = toPack.filter((p) => !existsSync(join(p.dir, "dist")));
  if (unbuilt.length > 0) {
    const filters = unbuilt.flatMap((p) => [`--filter=${p.manifest.name}`]);
    await run("pnpm", ["exec", "turbo", "run", "build", ...filters], { cwd: repo, maxBuffer: 64 << 20 });
  }
  const out = join(scratch, "tarballs");
  mkdirSync(out);
  for (const pkg of toPack) {
    const { stdout } = await run("pnpm", ["pack", "--pack-destination", out, "--json"], {
      cwd: pkg.dir,
      maxBuffer: 64 << 20,
    });
    const file = JSON.parse(stdout).filename;
    const unpacked = join(scratch, "unpacked", pkg.manifest.name);
    mkdirSync(unpacked, { recursive: true });
    await run("tar", ["-xzf", file, "-C", unpacked]);
    const root = join(unpacked, "package");
    const files = (await run("tar", ["-tzf", file])).stdout
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => l.replace(/^package\//, ""));
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    tarballs.set(pkg.manifest.name, { file, manifest, files, root });
  }
}, 15 * MINUTES);

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

describe("packed packages", () => {
  it("ship exports that point at dist only, without the factflow-source condition", () => {
    for (const pkg of published) {
      const packed = tarballs.get(pkg.manifest.name);
      const where = `${pkg.manifest.name} (${relative(repo, pkg.dir)}/package.json)`;
      expect(JSON.stringify(packed.manifest.exports), `${where}: set publishConfig.exports`).not.toContain(
        "factflow-source",
      );
      for (const target of exportTargets(packed.manifest.exports)) {
        if (target === "./package.json") continue;
        expect(target, `${where}: export target outside dist`).toMatch(/^\.\/dist\//);
        expect(packed.files, `${where}: ${target} is not in the tarball; build it`).toContain(
          target.slice(2),
        );
      }
      // The source-only condition must not survive anywhere (a drifted publishConfig would ship it).
      const sourceExports = exportTargets(pkg.manifest.exports).filter((t) => t.startsWith("./src/"));
      for (const target of sourceExports) expect(packed.files).not.toContain(target.slice(2));
    }
  });

  it("replace workspace: versions and depend on no private workspace package", () => {
    for (const pkg of published) {
      const { manifest } = tarballs.get(pkg.manifest.name);
      const deps = {
        ...manifest.dependencies,
        ...manifest.optionalDependencies,
        ...manifest.peerDependencies,
      };
      for (const [name, range] of Object.entries(deps)) {
        expect(range, `${pkg.manifest.name} → ${name}`).not.toMatch(/^workspace:/);
        const inner = all.get(name);
        expect(
          inner?.manifest.private === true ? `${name} is private` : "ok",
          `${pkg.manifest.name} depends on ${name}, which is never published: publish it or bundle what is needed`,
        ).toBe("ok");
      }
    }
  });

  it("have READMEs whose links work on the registry (absolute URLs or anchors only)", () => {
    for (const pkg of published) {
      const { root } = tarballs.get(pkg.manifest.name);
      const readme = join(root, "README.md");
      expect(existsSync(readme), `${pkg.manifest.name} ships no README.md`).toBe(true);
      const relativeLinks = [...readFileSync(readme, "utf8").matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1])
        .filter((href) => !/^(https?:|mailto:|#)/.test(href));
      expect(relativeLinks, `${pkg.manifest.name}: relative links break on the registry`).toEqual([]);
    }
  });
});

describe("a scratch project outside the workspace", () => {
  const project = join(scratch, "project");

  beforeAll(async () => {
    mkdirSync(project);
    const spec = (name) => `file:${tarballs.get(name).file}`;
    const names = [...tarballs.keys()];
    writeFileSync(
      join(project, "package.json"),
      `${JSON.stringify(
        {
          name: "factflow-pack-smoke",
          private: true,
          type: "module",
          dependencies: Object.fromEntries(published.map((p) => [p.manifest.name, spec(p.manifest.name)])),
          // Inner @factflow dependencies resolve to the tarballs too, never to the registry.
          overrides: Object.fromEntries(names.map((n) => [n, spec(n)])),
        },
        null,
        2,
      )}\n`,
    );
    await run("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error"], {
      cwd: project,
      maxBuffer: 64 << 20,
      env: { ...process.env, npm_config_workspaces: "false" },
    });
  }, 15 * MINUTES);

  const importIn = (code, conditions = []) =>
    run(
      process.execPath,
      [...conditions.map((c) => `--conditions=${c}`), "--input-type=module", "-e", code],
      {
        cwd: project,
      },
    );

  it(
    "imports every published package and subpath export",
    async () => {
      for (const pkg of published) {
        const packed = tarballs.get(pkg.manifest.name).manifest;
        const subpaths = Object.entries(packed.exports)
          .filter(([key, value]) => value !== null && !key.includes("*") && key !== "./package.json")
          .map(([key]) => (key === "." ? pkg.manifest.name : `${pkg.manifest.name}/${key.slice(2)}`));
        for (const specifier of subpaths) {
          const { stdout } = await importIn(
            `const m = await import(${JSON.stringify(specifier)}); console.log(Object.keys(m).length);`,
          );
          expect(Number(stdout.trim()), `${specifier} exports nothing`).toBeGreaterThan(0);
        }
      }
    },
    10 * MINUTES,
  );

  it(
    "ignores the factflow-source condition (src is not shipped) and blocks deep imports",
    async () => {
      const { stdout } = await importIn(
        'const m = await import("@factflow/engine"); console.log(typeof m.createEngine);',
        ["factflow-source"],
      );
      expect(stdout.trim()).toBe("function");
      await expect(importIn('await import("@factflow/engine/internal/ids.js");')).rejects.toThrow(
        /ERR_PACKAGE_PATH_NOT_EXPORTED/,
      );
    },
    2 * MINUTES,
  );

  it(
    "runs the factflow command: help and an offline config validate",
    async () => {
      const bin = join(project, "node_modules", ".bin", "factflow");
      const help = await run(bin, ["--help"], { cwd: project });
      expect(help.stdout).toContain("factflow run <pipeline.yaml>");
      writeFileSync(
        join(project, "pipeline.yaml"),
        "name: smoke\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: smoke.in }\n    adapters:\n      - type: passthrough\n",
      );
      const valid = await run(bin, ["config", "validate", "pipeline.yaml"], { cwd: project });
      expect(valid.stdout).toContain("pipeline.yaml: valid");
      expect(existsSync(join(project, ".factflow")), "validate must not create the data directory").toBe(
        false,
      );
    },
    2 * MINUTES,
  );
});
