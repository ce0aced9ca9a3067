import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

// `factflow serve` stopped by SIGTERM the moment it listens, while its start-up work (resuming
// executions left running) still reads the database: it must close cleanly and exit 0. It used to
// end with exit code 13 ("unsettled top-level await") in 6 of 10 such stops: a close step awaited
// work that held no handle, and the step's deadline timer was unref'd.

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
const dir = mkdtempSync(join(tmpdir(), "factflow-serve-signal-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function serveThenTerm(
  index: number,
): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const home = join(dir, `run-${index}`);
  mkdirSync(join(home, "configs"), { recursive: true });
  const child = spawn(
    process.execPath,
    ["--conditions=factflow-source", "--import", "tsx", BIN, "serve", "--port", "0"],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? home,
        FACTFLOW_PGLITE_TEMPLATE_DIR: process.env.FACTFLOW_PGLITE_TEMPLATE_DIR ?? "",
        FACTFLOW_DATA_DIR: join(home, "data"),
        FACTFLOW_CONFIG_DIR: join(home, "configs"),
        FACTFLOW_EMBEDDED_MODE: "file",
      },
      stdio: ["ignore", "ignore", "pipe"],
    },
  );
  let stderr = "";
  let sent = false;
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    if (!sent && stderr.includes("factflow server listening")) {
      sent = true;
      child.kill("SIGTERM");
    }
  });
  // A server that never listens is killed, so the test fails on its exit code instead of hanging.
  const stuck = setTimeout(() => child.kill("SIGKILL"), 150_000);
  return new Promise((done) =>
    child.once("exit", (code, signal) => {
      clearTimeout(stuck);
      done({ code, signal, stderr });
    }),
  );
}

describe("factflow serve stopped by SIGTERM right after it listens", () => {
  it("closes cleanly and exits 0, every time", async () => {
    for (let i = 0; i < 4; i++) {
      const { code, signal, stderr } = await serveThenTerm(i);
      const tail = stderr.split("\n").slice(-6).join("\n");
      expect({ run: i, code, signal }, tail).toEqual({ run: i, code: 0, signal: null });
      expect(stderr).toContain("factflow server stopped");
    }
  }, 600_000);
});
