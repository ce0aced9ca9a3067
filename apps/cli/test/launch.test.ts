import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
const LAUNCH = join(ROOT, "apps/cli/launch/factflow.mjs");
const scratch = realpathSync(mkdtempSync(join(tmpdir(), "factflow-launch-")));

/** Runs `factflow ...` exactly as `pnpm factflow` does: the launcher, without tsx. */
function factflow(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--conditions=factflow-source", LAUNCH, ...args],
      {
        cwd: ROOT,
        env: { ...process.env, FACTFLOW_DATA_DIR: join(scratch, "data"), FACTFLOW_SERVER_URL: "" },
        timeout: 180_000,
      },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }),
    );
  });
}

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the workspace's factflow command (launch/factflow.mjs)", () => {
  it("runs the example from the bundle, its TypeScript adapters compiled without tsx", async () => {
    const input = JSON.stringify({ roots: [join(ROOT, "examples/docs-ingest/sample-docs")] });
    const result = await factflow(["run", "examples/docs-ingest/pipeline.yaml", "--input", input, "--json"]);
    expect(result.stderr).not.toContain("running the sources through tsx");
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout).status).toBe("completed");
  });

  it("gives a compiled adapter module its own import.meta.url and its files' imports", async () => {
    const dir = join(scratch, "pipeline");
    mkdirSync(join(dir, "lib"), { recursive: true });
    writeFileSync(
      join(dir, "lib/where.ts"),
      'export const where: string = new URL(".", import.meta.url).pathname;\n',
    );
    writeFileSync(
      join(dir, "adapters.ts"),
      [
        'import { writeFileSync } from "node:fs";',
        'import type { AdapterDefinition } from "@factflow/protocols";',
        'import { where } from "./lib/where.js";',
        'writeFileSync(new URL("./loaded.json", import.meta.url), JSON.stringify({ where }));',
        "export const adapters: readonly AdapterDefinition[] = [",
        '  { type: "where_am_i", create: () => ({ process: async () => ({ data: null }) }) },',
        "];",
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(dir, "pipeline.yaml"),
      [
        "name: where",
        "adapter_modules: [./adapters.ts]",
        "init: { route: a, message: {} }",
        "routes:",
        "  a:",
        "    inbound: { queue: where.a }",
        "    adapters: [{ type: where_am_i }]",
        "",
      ].join("\n"),
    );
    const result = await factflow(["config", "validate", join(dir, "pipeline.yaml")]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const loaded = JSON.parse(readFileSync(join(dir, "loaded.json"), "utf8"));
    expect(loaded).toEqual({ where: `${join(dir, "lib")}/` });
  });
});

describe("old bundle builds", () => {
  it("count as in use while a process that marked them runs, not after it exited", async () => {
    // @ts-expect-error: the launcher is plain JavaScript without declarations
    const { inUse } = (await import("../launch/bundle.mjs")) as { inUse(dir: string): Promise<boolean> };
    const build = join(scratch, "build-in-use");
    mkdirSync(build, { recursive: true });
    expect(await inUse(build)).toBe(false);
    // A process that has exited: its pid answers no signal any more.
    const exited = await new Promise<number>((done) => {
      const child = execFile(process.execPath, ["-e", ""], () => done(child.pid as number));
    });
    writeFileSync(join(build, `in-use-${exited}`), "");
    expect(await inUse(build)).toBe(false);
    writeFileSync(join(build, `in-use-${process.pid}`), "");
    expect(await inUse(build)).toBe(true);
  });
});
