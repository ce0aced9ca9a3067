import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { main } from "../src/cli.js";
import type { Output } from "../src/output.js";

// In-process commands that start an execution, wait for it, then close their runtime: each must
// return, whatever its provider, with lineage on PostgreSQL (a close racing a query in flight used
// to leave the process alive for ever in about half the runs).
const ROUNDS = 20;
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

function artemisUrl(): string {
  if (process.env.ARTEMIS_STOMP_URL !== undefined) return process.env.ARTEMIS_STOMP_URL;
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "stomp://127.0.0.1:61613";
}

function reachable(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), timeout: 1000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

const PROVIDERS: { name: string; env: Record<string, string>; needs: string[] }[] = [
  { name: "embedded", env: { FACTFLOW_PROVIDER: "embedded", FACTFLOW_EMBEDDED_MODE: "memory" }, needs: [] },
  {
    name: "rabbitmq",
    env: { FACTFLOW_PROVIDER: "rabbitmq", FACTFLOW_RABBITMQ_URL: RABBITMQ_URL },
    needs: [RABBITMQ_URL],
  },
  {
    name: "artemis",
    env: {
      FACTFLOW_PROVIDER: "artemis",
      FACTFLOW_ARTEMIS_URL: artemisUrl(),
      FACTFLOW_ARTEMIS_USER: process.env.ARTEMIS_USER ?? "factflow",
      FACTFLOW_ARTEMIS_PASSWORD: process.env.ARTEMIS_PASSWORD ?? "factflow",
    },
    needs: [artemisUrl()],
  },
];

const dir = mkdtempSync(join(tmpdir(), "factflow-exit-"));
writeFileSync(
  join(dir, "quick.yaml"),
  "name: quick\ninit: { route: a, message: { items: [1, 2, 3] } }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: split, config: { field: items, as: item } }]\n    outbound: [b.in]\n  b:\n    inbound: { queue: b.in, concurrency: 3 }\n    adapters: [{ type: passthrough }]\n",
);
const databases: string[] = [];
const psql = (sql: string) =>
  execFileSync("psql", [DATABASE_URL, "-v", "ON_ERROR_STOP=1", "-qc", sql], { stdio: "pipe" });

afterAll(() => {
  for (const name of databases) {
    try {
      psql(`drop database if exists "${name}" with (force)`);
    } catch {}
  }
  rmSync(dir, { recursive: true, force: true });
});

function capture(): Output & { stdout: string[]; stderr: string[] } {
  const stdout: string[] = [];
  const stderr: string[] = [];
  return { stdout, stderr, isTty: false, out: (t) => stdout.push(t), err: (t) => stderr.push(t) };
}

/** Runs one command; a command that never returns fails the test instead of hanging it. */
async function command(argv: string[], env: Record<string, string>) {
  const output = capture();
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    main(argv, { output, env, cwd: dir }),
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`factflow ${argv.join(" ")} did not return (hung)`)),
        120_000,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  return { code, stdout: output.stdout.join("\n"), stderr: output.stderr.join("\n") };
}

const postgres = await reachable(DATABASE_URL);
for (const provider of PROVIDERS) {
  const services = [postgres, ...(await Promise.all(provider.needs.map(reachable)))];
  const missing = services.includes(false);
  if (missing)
    console.warn(
      `[factflow/cli] exit tests on ${provider.name} ${required ? "FAIL" : "skipped"}: a service is unreachable`,
    );
  describe.skipIf(missing && !required)(`in-process commands on ${provider.name} + PostgreSQL`, () => {
    it(`config run --wait and replay --wait return ${ROUNDS} times each, closing cleanly`, async () => {
      if (missing)
        throw new Error(`FACTFLOW_REQUIRE_SERVICES=1 but a service of ${provider.name} is unreachable`);
      const database = `factflow_exit_${provider.name}_${Date.now().toString(36)}`;
      psql(`create database "${database}"`);
      databases.push(database);
      const url = new URL(DATABASE_URL);
      url.pathname = `/${database}`;
      const env = {
        ...provider.env,
        FACTFLOW_DATABASE_URL: url.toString(),
        FACTFLOW_CONFIG_DIR: dir,
        FACTFLOW_DATA_DIR: join(dir, `data-${provider.name}`),
      };
      let last = "";
      for (let round = 0; round < ROUNDS; round++) {
        const run = await command(["config", "run", "quick", "--wait"], env);
        expect(run.code, `round ${round}: ${run.stderr}`).toBe(0);
        expect(run.stderr).not.toMatch(/during close/);
        last = /started execution (\S+)/.exec(run.stdout)?.[1] ?? "";
        expect(last).not.toBe("");
      }
      for (let round = 0; round < ROUNDS; round++) {
        const replay = await command(["replay", last, "--from", "b", "--wait"], env);
        expect(replay.code, `round ${round}: ${replay.stderr}`).toBe(0);
        expect(replay.stderr).not.toMatch(/during close/);
      }
    }, 600_000);
  });
}
