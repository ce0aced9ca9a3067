import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

// `factflow run` on pipelines that can never finish, as a real process: it says what the execution
// waits for and exits 3 when told to give up, never silently (Node's exit code 13 on an unsettled
// await).

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
const dir = mkdtempSync(join(tmpdir(), "factflow-cli-stall-"));

writeFileSync(
  join(dir, "adapters.mjs"),
  `export const adapters = [
  {
    type: "never_settles",
    description: "returns a promise nothing will settle, and keeps nothing alive",
    create: () => ({ type: "never_settles", process: () => new Promise(() => {}) }),
  },
  {
    type: "waits_for_nothing",
    description: "waits for a wake-up that never comes while a timer keeps the process alive",
    create: () => ({
      type: "waits_for_nothing",
      process: () => new Promise(() => { setInterval(() => {}, 1000); }),
    }),
  },
];
`,
);

/** A two-route chain whose second route runs `adapter`. */
function pipeline(name: string, adapter: string): string {
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `name: ${name}
adapter_modules: [./adapters.mjs]
init: { route: a, message: { n: 1 } }
routes:
  a: { inbound: { queue: q.a }, adapters: [{ type: passthrough }], outbound: [q.b] }
  b: { inbound: { queue: q.b }, adapters: [{ type: ${adapter} }] }
`,
  );
  return file;
}

/** Runs `factflow ...` as `pnpm factflow` does, in a data directory of its own (queues in memory). */
function factflow(
  args: string[],
  dataDir: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--conditions=factflow-source", "--import", "tsx", BIN, ...args],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          FACTFLOW_DATA_DIR: dataDir,
          FACTFLOW_SERVER_URL: "",
          // The file provider's own wake-ups are not what these tests are about.
          FACTFLOW_EMBEDDED_MODE: "memory",
        },
        timeout: 120_000,
      },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }),
    );
  });
}

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("factflow run on a pipeline that cannot finish", () => {
  it("a promise nothing settles: says what it waits for, gives up after --stall-timeout and marks the execution failed", async () => {
    // The running execution keeps the process alive (its completion poll, the handler's deadline),
    // so the run reports and gives up rather than ending on an unsettled await.
    const data = join(dir, "never");
    const result = await factflow(
      ["run", pipeline("never", "never_settles"), "--stall-after", "1", "--stall-timeout", "4"],
      data,
    );
    expect(result.code).toBe(3);
    expect(result.stderr).toContain('  - route "b": 1 delivery running its adapters');
    expect(result.stderr).toMatch(/ {2}b \(queue q\.b\): 1 in flight/);
    const id = /running never as execution (\S+)/.exec(result.stdout)?.[1];
    expect(id).toBeDefined();
    expect(result.stderr).toContain(`execution ${id} is marked failed`);

    const shown = await factflow(["executions", "show", id as string, "--json"], data);
    expect(shown.code).toBe(0);
    const record = JSON.parse(shown.stdout) as { status: string; error: string };
    expect(record.status).toBe("failed");
    expect(record.error).toMatch(/^stalled: no progress for [\d.]+ s \(factflow run --stall-timeout 4\)/);
  });

  it("reports after --stall-after and gives up after --stall-timeout while a timer keeps it alive", async () => {
    const file = pipeline("waiting", "waits_for_nothing");
    const result = await factflow(
      ["run", file, "--stall-after", "1", "--stall-timeout", "4"],
      join(dir, "waiting"),
    );
    expect(result.code).toBe(3);
    const report = result.stderr.indexOf("has made no progress for");
    const givenUp = result.stderr.search(/made no progress for [\d.]+ s \(--stall-timeout 4\); giving up/);
    expect(report).toBeGreaterThanOrEqual(0);
    expect(givenUp).toBeGreaterThan(report);
    expect(result.stderr.slice(report)).toContain('  - route "b": 1 delivery running its adapters');

    const json = await factflow(["run", file, "--stall-timeout", "2", "--json"], join(dir, "waiting-json"));
    expect(json.code).toBe(3);
    const out = JSON.parse(json.stdout) as {
      status: string;
      reason: string;
      error: string;
      stall: { quiet_ms: number; waiting_for: string[]; routes: { route: string; in_flight: number }[] };
    };
    expect(out).toMatchObject({ status: "stalled", reason: "timeout" });
    expect(out.error).toMatch(/^stalled: no progress for [\d.]+ s \(factflow run --stall-timeout 2\)/);
    expect(out.stall.quiet_ms).toBeGreaterThanOrEqual(2000);
    expect(out.stall.waiting_for).toContain('route "b": 1 delivery running its adapters');
    expect(out.stall.routes.find((r) => r.route === "b")?.in_flight).toBe(1);
  });

  it("refuses a --stall-timeout that is not a positive number of seconds", async () => {
    const result = await factflow(
      ["run", pipeline("bad", "never_settles"), "--stall-timeout", "0"],
      join(dir, "bad"),
    );
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--stall-timeout must be a number of seconds above 0");
  });
});
