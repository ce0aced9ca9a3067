import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, waitFor } from "./helpers.js";
import { createTestDatabase, DATABASE_URL, unreachable } from "./services.js";

// Two real processes on one PostgreSQL database, each on its own data directory: a `factflow run`
// and a `factflow serve` on the embedded provider started while the run is under way. The server
// leaves the run's execution to it while the run lives, and resumes it once the run is killed
// (kill -9) and its lease has run out.

const skip = (await unreachable("execution ownership across processes", [DATABASE_URL])) !== undefined;

const ROOT = resolve(import.meta.dirname, "../../..");
const CLI = join(ROOT, "apps/cli/src/bin.ts");
/** Short leases, so a killed process's executions are free soon. */
const LEASE_MS = "2000";

const PIPELINE = `
name: long
init: { route: wait, message: { n: 1 } }
routes:
  wait:
    inbound: { queue: long.in }
    adapters:
      - type: delay
        config: { ms: 600000 }
`;

/** What a server logs once it has looked at an execution left running: resumed, or left to its owner. */
const DECIDED = /resumed execution left running|left a running execution to the live process that owns it/;

/** A `factflow` child process with what it printed so far. */
interface Child {
  readonly child: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}

const children = new Set<ChildProcess>();

function factflow(args: readonly string[], env: Record<string, string>): Child {
  const child = spawn(process.execPath, ["--conditions=factflow-source", "--import", "tsx", CLI, ...args], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? tmpdir(),
      FACTFLOW_CLUSTER_LEASE_MS: LEASE_MS,
      FACTFLOW_SERVER_URL: "",
      ...(process.env.FACTFLOW_PGLITE_TEMPLATE_DIR === undefined
        ? {}
        : { FACTFLOW_PGLITE_TEMPLATE_DIR: process.env.FACTFLOW_PGLITE_TEMPLATE_DIR }),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString("utf8");
  });
  const exited = new Promise<number | null>((done) =>
    child.once("exit", (code) => {
      children.delete(child);
      done(code);
    }),
  );
  return { child, output: () => output, exited };
}

/** Resolves with the first match of `pattern` in the child's output. */
function printed(process: Child, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  return waitFor(
    async () => {
      if (process.child.exitCode !== null)
        throw new Error(
          `the process exited (${process.child.exitCode}) before ${what}:\n${process.output()}`,
        );
      return pattern.exec(process.output()) ?? undefined;
    },
    120_000,
    `${what}; output so far:\n${process.output()}`,
  );
}

describe.skipIf(skip)("execution ownership across processes on one PostgreSQL", () => {
  const dir = mkdtempSync(join(tmpdir(), "factflow-ownership-"));
  const pipeline = join(dir, "long.yaml");
  let database: Awaited<ReturnType<typeof createTestDatabase>>;

  beforeAll(async () => {
    writeFileSync(pipeline, PIPELINE);
    database = await createTestDatabase("factflow_server_ownership");
  });
  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `factflow run` of the long pipeline on its own data directory; resolves with its execution id. */
  async function startRun(name: string): Promise<{ run: Child; id: string }> {
    const run = factflow(["run", pipeline], {
      FACTFLOW_DATA_DIR: join(dir, name),
      FACTFLOW_DATABASE_URL: database.url,
    });
    const id = (await printed(run, /as execution (\S+)/, "the run to start"))[1] as string;
    return { run, id };
  }

  /** `factflow serve` on its own data directory; resolves with its URL once it listens. */
  async function startServe(
    name: string,
    env: Record<string, string> = {},
  ): Promise<{ serve: Child; base: string }> {
    const serve = factflow(["serve", "--port", "0"], {
      FACTFLOW_DATA_DIR: join(dir, name),
      FACTFLOW_DATABASE_URL: database.url,
      FACTFLOW_EMBEDDED_MODE: "file",
      ...env,
    });
    const base = (await printed(serve, /listening on (http:\/\/\S+)/, "the server to listen"))[1] as string;
    return { serve, base };
  }

  async function stop(process: Child, signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
    if (process.child.exitCode === null) process.child.kill(signal);
    return process.exited;
  }

  it("a server started beside a live `factflow run` leaves the run's execution to it", async () => {
    const { run, id } = await startRun("run-a");
    const { serve, base } = await startServe("serve-a");
    try {
      const decided = await printed(serve, DECIDED, "the server to decide about the run's execution");
      expect(decided[0]).toMatch(/left a running execution/);
      expect((await call(base, "GET", "/api/v1/system/info")).body.executions_running).toBe(0);
      const abandoned = await call(base, "GET", `/api/v1/executions/${id}/lineage?status=abandoned`);
      expect(abandoned.body.total).toBe(0);

      // The run still has it: it cancels it on Ctrl-C and reports it cancelled.
      run.child.kill("SIGINT");
      expect(await run.exited).toBe(1);
      expect(run.output()).toMatch(/cancelled/);
      const final = await call(base, "GET", `/api/v1/executions/${id}`);
      expect(final.body.status).toBe("cancelled");
      expect((await call(base, "GET", "/api/v1/system/info")).body.executions_running).toBe(0);
    } finally {
      await stop(run, "SIGKILL");
      await stop(serve);
    }
  }, 240_000);

  it("resumes the execution of a `factflow run` killed with kill -9 once its lease has run out", async () => {
    const { run, id } = await startRun("run-b");
    const { serve, base } = await startServe("serve-b");
    try {
      const decided = await printed(serve, DECIDED, "the server to decide about the run's execution");
      expect(decided[0]).toMatch(/left a running execution/);
      expect(await stop(run, "SIGKILL")).toBe(null);
      await printed(
        serve,
        /resumed execution left running/,
        "the server to resume it after the lease ran out",
      );
      const info = await call(base, "GET", "/api/v1/system/info");
      expect(info.body.executions_running).toBe(1);
      const cancelled = await call(base, "POST", `/api/v1/executions/${id}/cancel`);
      expect(cancelled.body).toMatchObject({ status: "cancelled", cancelled: true });
    } finally {
      await stop(run, "SIGKILL");
      await stop(serve);
    }
  }, 240_000);

  it("a server restarted after kill -9 on its data directory resumes its executions before its old lease runs out", async () => {
    // A lease far longer than the test: only recognising its own dead predecessor lets it resume.
    const long = { FACTFLOW_CLUSTER_LEASE_MS: "600000" };
    const first = await startServe("serve-c", long);
    let second: Child | undefined;
    try {
      const uploaded = await call(first.base, "POST", "/api/v1/configs/long/versions", { source: PIPELINE });
      expect(uploaded.status).toBe(201);
      const created = await call(first.base, "POST", "/api/v1/executions", { config: "long" });
      expect(created.status).toBe(201);
      expect(await stop(first.serve, "SIGKILL")).toBe(null);
      const restarted = await startServe("serve-c", long);
      second = restarted.serve;
      const decided = await printed(second, DECIDED, "the restarted server to decide about its execution");
      expect(decided[0]).toMatch(/resumed execution left running/);
      expect((await call(restarted.base, "GET", "/api/v1/system/info")).body.executions_running).toBe(1);
      const cancelled = await call(restarted.base, "POST", `/api/v1/executions/${created.body.id}/cancel`);
      expect(cancelled.body).toMatchObject({ status: "cancelled", cancelled: true });
    } finally {
      await stop(first.serve, "SIGKILL");
      if (second !== undefined) await stop(second);
    }
  }, 240_000);
});
