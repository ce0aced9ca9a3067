import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
const PIPELINE = join(ROOT, "examples/docs-ingest/pipeline.yaml");
const SAMPLE_DOCS = join(ROOT, "examples/docs-ingest/sample-docs");
const dataDir = mkdtempSync(join(tmpdir(), "factflow-cli-memory-"));

function factflow(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--conditions=factflow-source", "--import", "tsx", BIN, ...args],
      {
        cwd: ROOT,
        env: { ...process.env, FACTFLOW_DATA_DIR: dataDir, FACTFLOW_SERVER_URL: "" },
        timeout: 120_000,
      },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }),
    );
  });
}

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("factflow run --lineage memory", () => {
  it("runs the example with lineage in memory: same summary, no database on disk", async () => {
    const input = JSON.stringify({ roots: [SAMPLE_DOCS] });
    const result = await factflow(["run", PIPELINE, "--input", input, "--json", "--lineage", "memory"]);
    expect(result.code).toBe(0);
    const summary = JSON.parse(result.stdout) as { status: string; lineage_rows: number };
    expect(summary.status).toBe("completed");
    expect(summary.lineage_rows).toBeGreaterThan(0);
    expect(existsSync(join(dataDir, "pglite"))).toBe(false);
  });

  it("rejects an unknown lineage mode with a usage error", async () => {
    const result = await factflow(["run", PIPELINE, "--lineage", "disk"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/lineage.*must be database or memory/);
  });
});
