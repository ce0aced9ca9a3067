import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { parseSse } from "../src/api-client.js";
import { main } from "../src/cli.js";
import type { Output } from "../src/output.js";
import { ProgressDisplay } from "../src/progress.js";

const silent: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
  child: () => silent,
};

function capture(isTty = false): Output & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, isTty, out: (t) => stdout.push(t), err: (t) => stderr.push(t) };
}

describe("argument handling", () => {
  it("prints usage for --help and exits 0", async () => {
    const output = capture();
    expect(await main(["--help"], { output, env: {} })).toBe(0);
    expect(output.stdout.join("\n")).toContain("factflow run <pipeline.yaml>");
  });

  it("exits 2 on an unknown flag, an unknown command or a missing argument", async () => {
    const flag = capture();
    expect(await main(["run", "--bogus"], { output: flag, env: {} })).toBe(2);
    expect(flag.stderr.join("\n")).toContain("--bogus");
    const command = capture();
    expect(await main(["launch"], { output: command, env: {} })).toBe(2);
    expect(command.stderr.join("\n")).toContain('unknown command "launch"');
    const missing = capture();
    expect(await main(["run"], { output: missing, env: {} })).toBe(2);
    expect(missing.stderr.join("\n")).toContain("needs a pipeline file");
  });

  it("exits 2 with one line per problem on invalid settings", async () => {
    const output = capture();
    const pipeline = new URL("../../../examples/docs-ingest/pipeline.yaml", import.meta.url).pathname;
    const code = await main(["run", pipeline], {
      output,
      env: { FACTFLOW_PROVIDER: "kafka", FACTFLOW_PORT: "-1" },
      cwd: "/tmp",
    });
    expect(code).toBe(2);
    const text = output.stderr.join("\n");
    expect(text).toContain("provider");
    expect(text).toContain("port");
  });

  it("reports an unreachable server with a hint", async () => {
    const output = capture();
    const code = await main(["executions", "list", "--server", "http://127.0.0.1:9"], { output, env: {} });
    expect(code).toBe(1);
    expect(output.stderr.join("\n")).toContain("cannot reach the Factflow server at http://127.0.0.1:9");
  });
});

describe("config validate (in process)", () => {
  it("exits 0 on a valid file and 1 with one line per problem on an invalid one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-cli-validate-"));
    const env = { FACTFLOW_DATA_DIR: join(dir, "data") };
    try {
      const pipeline = new URL("../../../examples/docs-ingest/pipeline.yaml", import.meta.url).pathname;
      const good = capture();
      expect(await main(["config", "validate", pipeline], { output: good, env, cwd: dir })).toBe(0);
      expect(good.stdout.join("\n")).toContain("pipeline.yaml: valid");
      const bad = join(dir, "bad.yaml");
      writeFileSync(
        bad,
        "name: bad\ninit: { route: nowhere }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters:\n      - type: no-such-adapter\n",
      );
      const invalid = capture();
      expect(await main(["config", "validate", "bad.yaml"], { output: invalid, env, cwd: dir })).toBe(1);
      const lines = invalid.stdout.filter((l) => l.startsWith("bad.yaml"));
      expect(lines.length).toBeGreaterThanOrEqual(2);
      expect(lines.join("\n")).toContain("no-such-adapter");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe("config validate is offline", () => {
  it("opens nothing: no data directory is created, and it works while a server holds the directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-cli-offline-"));
    const data = join(dir, "data");
    const pipeline = new URL("../../../examples/docs-ingest/pipeline.yaml", import.meta.url).pathname;
    try {
      const first = capture();
      expect(await main(["config", "validate", pipeline], { output: first, env: {}, cwd: dir })).toBe(0);
      expect(
        await main(["config", "validate", pipeline, "--data-dir", data], {
          output: capture(),
          env: {},
          cwd: dir,
        }),
      ).toBe(0);
      expect(existsSync(data) || existsSync(join(dir, ".factflow"))).toBe(false);
      // A server-like runtime owns the data directory (embedded journal lock, PGlite) meanwhile.
      const { composeRuntime, loadSettings } = await import("@factflow/runtime");
      const runtime = await composeRuntime(
        loadSettings({ env: {}, cwd: dir, overrides: { data_dir: data } }),
        {
          logger: silent,
          scheduleRetention: false,
        },
      );
      try {
        const beside = capture();
        expect(
          await main(["config", "validate", pipeline, "--json", "--data-dir", data], {
            output: beside,
            env: {},
            cwd: dir,
          }),
        ).toBe(0);
        expect(JSON.parse(beside.stdout.join("\n"))).toEqual({ valid: true, issues: [] });
      } finally {
        await runtime.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe("commands open only what they need", () => {
  it("reads executions without connecting the broker (an unreachable RabbitMQ does not matter)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-cli-reads-"));
    const env = {
      FACTFLOW_DATA_DIR: join(dir, "data"),
      FACTFLOW_PROVIDER: "rabbitmq",
      FACTFLOW_RABBITMQ_URL: "amqp://guest:guest@127.0.0.1:9",
    };
    try {
      const list = capture();
      expect(await main(["executions", "list", "--json"], { output: list, env, cwd: dir })).toBe(0);
      expect(JSON.parse(list.stdout.join("\n"))).toMatchObject({ total: 0, items: [] });
      // A command that needs the broker still says clearly that it cannot reach it.
      const dlq = capture();
      expect(await main(["dlq", "list"], { output: dlq, env, cwd: dir })).toBe(1);
      expect(dlq.stderr.join("\n")).toMatch(/127\.0\.0\.1:9|ECONNREFUSED|connect/i);
      expect(dlq.stderr.join("\n")).not.toContain("guest:guest");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("parseSse", () => {
  it("parses ids, event names and multi-line data, skipping comments", async () => {
    const text =
      ': keepalive\n\nid: 1\nevent: started\ndata: {"a":1}\n\nid: 2\nevent: route_progress\ndata: line1\ndata: line2\n\n';
    const body = new Response(text).body as ReadableStream<Uint8Array>;
    const events = [];
    for await (const e of parseSse(body)) events.push(e);
    expect(events).toEqual([
      { id: "1", event: "started", data: '{"a":1}' },
      { id: "2", event: "route_progress", data: "line1\nline2" },
    ]);
  });
});

describe("ProgressDisplay", () => {
  it("prints one plain line per changed route when not on a terminal", () => {
    const output = capture(false);
    const display = new ProgressDisplay(output, ["a", "b"], 0);
    display.update({ a: { acknowledged: 1 }, b: {} });
    display.update({ a: { acknowledged: 1 }, b: { acknowledged: 2, failed: 1 } });
    display.finish();
    expect(output.stdout).toEqual([
      "progress a: done=1 failed=0 rejected=0 in_flight=0 published=0",
      "progress b: done=0 failed=0 rejected=0 in_flight=0 published=0",
      "progress b: done=2 failed=1 rejected=0 in_flight=0 published=0",
    ]);
  });

  it("redraws the table in place on a terminal", () => {
    const output = capture(true);
    const display = new ProgressDisplay(output, ["a"]);
    display.update({ a: { acknowledged: 1 } });
    display.update({ a: { acknowledged: 2 } });
    expect(output.stdout[1]?.startsWith("\x1b[2A")).toBe(true);
    expect(output.stdout[1]).toContain("2");
  });
});
