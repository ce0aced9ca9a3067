import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { silentLogger } from "@factflow/protocols";
import { loadSettings, type RunningServer, startServer } from "@factflow/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../src/cli.js";
import type { Output } from "../src/output.js";

const EXAMPLE_DIR = resolve(import.meta.dirname, "../../../examples/docs-ingest");
const TOKEN = "cli-remote-token-123";
let server: RunningServer;
let dir: string;

function capture(): Output & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, isTty: false, out: (t) => stdout.push(t), err: (t) => stderr.push(t) };
}

/** Runs the CLI in process against the test server. */
async function factflow(...args: string[]) {
  const output = capture();
  const code = await main([...args, "--server", server.url], { output, env: { FACTFLOW_API_TOKEN: TOKEN } });
  return { code, stdout: output.stdout.join("\n"), stderr: output.stderr.join("\n") };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "factflow-cli-remote-"));
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: { data_dir: join(dir, "data"), config_dir: EXAMPLE_DIR, port: 0, api_token: TOKEN },
  });
  server = await startServer(settings, { logger: silentLogger, progressIntervalMs: 100 });
}, 120_000);

afterAll(async () => {
  await server?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

// Generous timeouts: the machine is shared, and each command opens HTTP streams to the server.
describe("remote commands (--server)", { timeout: 90_000 }, () => {
  let id: string;

  it("lists configs and runs one to completion with --wait", async () => {
    const list = await factflow("config", "list", "--json");
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout).map((c: { name: string }) => c.name)).toContain("docs-ingest");
    const input = JSON.stringify({ roots: [join(EXAMPLE_DIR, "sample-docs")] });
    const run = await factflow("config", "run", "docs-ingest", "--input", input, "--wait");
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    id = /started execution (\S+)/.exec(run.stdout)?.[1] ?? "";
    expect(run.stdout).toContain("completed");
  });

  it("lists and shows executions", async () => {
    const list = await factflow("executions", "list", "--json", "--status", "completed");
    expect(JSON.parse(list.stdout).items.map((e: { id: string }) => e.id)).toContain(id);
    const show = await factflow("executions", "show", id);
    expect(show.stdout).toMatch(/^enrich\s+13\s+12\s+1/m);
    const missing = await factflow("executions", "show", "00000000-0000-7000-8000-000000000000");
    expect(missing.code).toBe(1);
  });

  it("reads lineage and dead letters, and redrives one", async () => {
    const failed = await factflow("lineage", id, "--status", "failed", "--kind", "adapter", "--json");
    expect(JSON.parse(failed.stdout).total).toBe(5);
    const dlq = await factflow("dlq", "list", "--json");
    const queues = JSON.parse(dlq.stdout) as { destination: string; dlq_depth: number }[];
    expect(queues).toContainEqual({ destination: `/queue/${id}/docs.sections`, dlq_depth: 1, depth: 0 });
    const browse = await factflow("dlq", "list", "--execution", id, "--queue", "docs.sections", "--json");
    const letter = JSON.parse(browse.stdout).items[0] as { message_id: string };
    const show = await factflow(
      "dlq",
      "show",
      "--execution",
      id,
      "--queue",
      "docs.sections",
      letter.message_id,
    );
    expect(show.stdout).toContain("simulated outage");
    const redrive = await factflow(
      "dlq",
      "redrive",
      "--execution",
      id,
      "--queue",
      "docs.sections",
      letter.message_id,
    );
    expect(redrive.stdout).toBe("redriven: true");
  });

  it("replays a segment and waits for it", async () => {
    const replay = await factflow("replay", id, "--from", "batch", "--wait");
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/replay of +\S+ from route batch/);
  });

  it("fails clearly without the token", async () => {
    const output = capture();
    const code = await main(["executions", "cancel", id, "--server", server.url], { output, env: {} });
    expect(code).toBe(1);
    expect(output.stderr.join("\n")).toContain("unauthorized");
  });
});
