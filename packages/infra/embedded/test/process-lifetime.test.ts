import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const packageDir = fileURLToPath(new URL("..", import.meta.url));

/** Runs a fixture in its own process; resolves with what it printed and its exit code. */
async function runChild(fixture: URL): Promise<{ out: string; err: string; code: number | null }> {
  const child = fileURLToPath(fixture);
  const proc = spawn(process.execPath, ["--conditions=factflow-source", "--import", "tsx", child], {
    cwd: packageDir,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  proc.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  proc.stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const killer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const code = await new Promise<number | null>((resolve) => proc.on("close", (c) => resolve(c)));
  clearTimeout(killer);
  return { out, err, code };
}

describe("timers and the process lifetime", () => {
  it("keeps the process alive for a delayed message and a retry while subscribed, then lets it exit", async () => {
    const { out, err, code } = await runChild(new URL("./fixtures/keepalive-child.ts", import.meta.url));
    expect(err).toBe("");
    expect(out).toBe("attempt 1\nattempt 2\n");
    expect(code, "the process exited by itself, not by the 60 s kill").toBe(0);
  }, 180_000);

  it("keeps the process alive while a handler waits only for its timeout", async () => {
    const { out, err, code } = await runChild(new URL("./fixtures/timeout-child.ts", import.meta.url));
    expect(err).toBe("");
    expect(out).toBe("attempt 1\nattempt 2\n");
    expect(code, "the process exited by itself, not by the 60 s kill").toBe(0);
  }, 180_000);
});
