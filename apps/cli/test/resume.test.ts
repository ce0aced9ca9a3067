import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
const dir = mkdtempSync(join(tmpdir(), "factflow-resume-"));
const dataDir = join(dir, "data");
const outDir = join(dir, "out");

// 40 items, each written once by the sink (an artefact per item): counted outside Factflow.
const PIPELINE = `
name: resumable
init: { route: split, message: { items: [${Array.from({ length: 40 }, (_, i) => i).join(", ")}] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [slow.in]
  slow:
    inbound: { queue: slow.in, concurrency: 2 }
    adapters: [{ type: delay, config: { ms: 150 } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in }
    adapters: [{ type: write_artefact, config: { key: "items/{body.item}.json" } }]
`;
const pipelineFile = join(dir, "pipeline.yaml");
writeFileSync(pipelineFile, PIPELINE);

function factflow(args: string[]) {
  return spawn(process.execPath, ["--conditions=factflow-source", "--import", "tsx", BIN, ...args], {
    cwd: ROOT,
    env: {
      ...process.env,
      FACTFLOW_DATA_DIR: dataDir,
      FACTFLOW_STORAGE_ROOT: outDir,
      FACTFLOW_SERVER_URL: "",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

function finished(
  child: ReturnType<typeof factflow>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr?.on("data", (c: Buffer) => {
    stderr += c.toString();
  });
  return new Promise((done) => child.once("exit", (code) => done({ code, stdout, stderr })));
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("factflow executions resume", () => {
  it("continues a run killed with SIGKILL, in process on the same data directory, to completion", async () => {
    const run = factflow(["run", pipelineFile]);
    let id: string | undefined;
    const ended = finished(run);
    await new Promise<void>((started, failed) => {
      const timer = setTimeout(() => failed(new Error("the run never started")), 60_000);
      run.stdout?.on("data", (chunk: Buffer) => {
        id ??= /as execution (\S+)/.exec(chunk.toString())?.[1];
        if (id !== undefined) {
          clearTimeout(timer);
          started();
        }
      });
    });
    // Let some items through, then kill it mid-run.
    await new Promise((r) => setTimeout(r, 2_000));
    run.kill("SIGKILL");
    await ended;
    const items = join(outDir, "items");
    const before = existsSync(items) ? readdirSync(items).length : 0;
    expect(before, "killed mid-run").toBeLessThan(40);

    const resumed = await finished(factflow(["executions", "resume", id as string]));
    expect(resumed.stderr).not.toMatch(/not running in this process/);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toContain(`resumed ${id}`);
    expect(resumed.stdout).toContain("completed");
    // Every item reached the sink: nothing acknowledged was lost. A write cut by the kill can leave
    // its hidden temp file (`.~tmp-…`, never an artefact); the storage sweeps those once they are a
    // minute old, at the next server start (docs/storage.md).
    const names = readdirSync(join(outDir, "items"));
    const leftovers = names.filter((name) => name.startsWith(".~tmp-"));
    expect(names.filter((name) => !leftovers.includes(name)).sort()).toEqual(
      Array.from({ length: 40 }, (_, i) => `${i}.json`).sort(),
    );
    expect(leftovers.length, `temp files left by the kill: ${leftovers.join(", ")}`).toBeLessThanOrEqual(2);
  }, 180_000);
});
