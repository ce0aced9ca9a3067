import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PGLITE_TEMPLATE_ENV, useDefaultPgliteTemplateDir } from "../src/pglite-template-dir.js";

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
// The suites' shared template directory (vitest.shared.ts): `prepare` then copies, never re-runs initdb.
const SHARED_TEMPLATES = process.env[PGLITE_TEMPLATE_ENV] ?? join(tmpdir(), "factflow-test-pglite-templates");
const dataDir = mkdtempSync(join(tmpdir(), "factflow-cli-prepare-"));

function factflow(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--conditions=factflow-source", "--import", "tsx", BIN, ...args],
      { cwd: ROOT, env: { ...process.env, FACTFLOW_SERVER_URL: "", ...env }, timeout: 180_000 },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }),
    );
  });
}

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("factflow prepare", () => {
  it("leaves a PGlite template that new data directories are copied from", async () => {
    const result = await factflow(["prepare"], { [PGLITE_TEMPLATE_ENV]: SHARED_TEMPLATES });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`template ready in ${SHARED_TEMPLATES}`);
    const templates = readdirSync(SHARED_TEMPLATES).filter((name) => /^pglite-[\d.]+-\w+$/.test(name));
    expect(templates.length).toBeGreaterThan(0);
    expect(existsSync(join(SHARED_TEMPLATES, templates[0] as string, "PG_VERSION"))).toBe(true);
  });

  it("says so when templates are turned off", async () => {
    const result = await factflow(["prepare"], { [PGLITE_TEMPLATE_ENV]: "" });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/no template directory/);
  });
});

describe("useDefaultPgliteTemplateDir", () => {
  it("points an unset variable at the installation's cache and never overrides a set one", () => {
    const unset: NodeJS.ProcessEnv = {};
    useDefaultPgliteTemplateDir(unset);
    const dir = unset[PGLITE_TEMPLATE_ENV] as string;
    expect(dir).toBe(join(ROOT, "apps/cli/node_modules/.cache/factflow"));
    expect(existsSync(dir)).toBe(true);

    const chosen: NodeJS.ProcessEnv = { [PGLITE_TEMPLATE_ENV]: dataDir };
    useDefaultPgliteTemplateDir(chosen);
    expect(chosen[PGLITE_TEMPLATE_ENV]).toBe(dataDir);

    const off: NodeJS.ProcessEnv = { [PGLITE_TEMPLATE_ENV]: "" };
    useDefaultPgliteTemplateDir(off);
    expect(off[PGLITE_TEMPLATE_ENV]).toBe("");
  });

  it("leaves the variable unset when the cache cannot be made", () => {
    // A directory under a regular file can never be created.
    const file = join(dataDir, "not-a-directory");
    writeFileSync(file, "");
    const env: NodeJS.ProcessEnv = {};
    useDefaultPgliteTemplateDir(env, join(file, "cache"));
    expect(env[PGLITE_TEMPLATE_ENV]).toBeUndefined();
  });
});
