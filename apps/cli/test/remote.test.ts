import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { type RunningServer, startServer } from "@factflow/server";
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
    const args = ["dlq", "redrive", "--execution", id, "--queue", "docs.sections", letter.message_id];
    // The execution is over: the server refuses, and the message says what to do instead.
    const refused = await factflow(...args);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("execution_not_running");
    expect(refused.stderr).toContain(`factflow replay ${id}`);
    const all = await factflow("dlq", "redrive", "--execution", id, "--queue", "docs.sections");
    expect(all.code).toBe(1);
    expect(all.stderr).toContain("execution_not_running");
    const redrive = await factflow(...args, "--force");
    expect(redrive.code).toBe(0);
    expect(redrive.stdout).toBe("redriven: true");
  });

  it("discards a dead letter", async () => {
    // A dead letter on a queue of its own, made through the server's real provider.
    const queue = `fftest-cli-discard-${Math.random().toString(36).slice(2, 8)}`;
    const destination = `/queue/${queue}`;
    const { provider } = server.runtime;
    const sub = await provider.subscribe(destination, () => "REJECTED", { subscription: "cli-discard" });
    try {
      await provider.publish(destination, { body: { n: 1 } });
      let messageId = "";
      const deadline = Date.now() + 60_000;
      while (messageId === "" && Date.now() < deadline) {
        const list = await factflow("dlq", "list", "--queue", queue, "--json");
        messageId = (JSON.parse(list.stdout).items[0]?.message_id as string | undefined) ?? "";
        if (messageId === "") await new Promise((r) => setTimeout(r, 50));
      }
      expect(messageId).not.toBe("");
      const discard = await factflow("dlq", "discard", "--queue", queue, messageId);
      expect(discard.code).toBe(0);
      expect(discard.stdout).toBe(`discarded ${messageId}`);
      const after = await factflow("dlq", "list", "--queue", queue, "--json");
      expect(JSON.parse(after.stdout).total).toBe(0);
      const again = await factflow("dlq", "discard", "--queue", queue, messageId);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain("not_found");
      const noId = await factflow("dlq", "discard", "--queue", queue);
      expect(noId.code).toBe(2);
    } finally {
      await sub.unsubscribe();
      await provider.admin.deleteDestination({ destination }, { keepDeadLetters: false });
    }
  });

  it("validates a config file: exit 0 when valid, 1 with every problem when not", async () => {
    const good = await factflow("config", "validate", join(EXAMPLE_DIR, "pipeline.yaml"));
    expect(good.code).toBe(0);
    expect(good.stdout).toContain(": valid");
    const badFile = join(dir, "bad.yaml");
    writeFileSync(
      badFile,
      "name: bad\ninit: { route: nowhere }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters:\n      - type: no-such-adapter\n",
    );
    const bad = await factflow("config", "validate", badFile, "--json");
    expect(bad.code).toBe(1);
    const result = JSON.parse(bad.stdout) as { valid: boolean; issues: { path: string }[] };
    expect(result.valid).toBe(false);
    expect(result.issues.length).toBeGreaterThanOrEqual(2);
    const missing = await factflow("config", "validate", join(dir, "absent.yaml"));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("cannot read");
  });

  it("replays a segment and waits for it", async () => {
    const replay = await factflow("replay", id, "--from", "batch", "--wait");
    expect(replay.code).toBe(0);
    expect(replay.stdout).toMatch(/replay of +\S+ from route batch/);
  });

  it("prunes finished executions with their lineage", async () => {
    const bad = await factflow("executions", "prune", "--older-than-days", "-3");
    expect(bad.code).toBe(2);
    const none = await factflow("executions", "prune");
    expect(none.code).toBe(2);
    const young = await factflow("executions", "prune", "--older-than-days", "1", "--json");
    expect(young.code).toBe(0);
    expect(JSON.parse(young.stdout)).toMatchObject({ older_than_days: 1, deleted: 0 });
    const all = await factflow("executions", "prune", "--older-than-days", "0");
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^deleted [2-9]\d* finished executions/);
    const gone = await factflow("executions", "show", id);
    expect(gone.code).toBe(1);
  });

  it("fails clearly without the token", async () => {
    const output = capture();
    const code = await main(["executions", "cancel", id, "--server", server.url], { output, env: {} });
    expect(code).toBe(1);
    expect(output.stderr.join("\n")).toContain("unauthorized");
  });
});
