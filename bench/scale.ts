/**
 * `pnpm bench scale [rabbitmq|artemis] [executions] [items]`: the same pipeline on 1, 2 and 3
 * `factflow serve` processes sharing one broker and one PostgreSQL (cluster mode, see
 * docs/deployment.md). Each round gets a fresh database, starts its servers, starts the executions
 * round-robin through them, and waits until every one has completed. Prints one JSON line per
 * round: `{"bench":"scale","provider",…,"processes":N,"msgsPerSec":…,"cpuMsPerMsg":…}`; the
 * baseline is the 1-process round of the same run (`speedup`).
 *
 * A "message" is one delivery handled by a route: per execution, the init message plus every item
 * on each of the two routes after the fan-out. CPU is the servers' own user+system time (from
 * /proc), so the broker's and PostgreSQL's share of the machine is not in `cpuMsPerMsg`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createScratchDatabase } from "./_scratch-database.js";

const ROOT = resolve(import.meta.dirname, "..");
const CLI = resolve(ROOT, "apps/cli/src/bin.ts");
const CLOCK_TICK_MS = 10;

function artemisUrl(): string {
  const file = join(homedir(), ".cache", "factflow", "services", "artemis", "stomp.url");
  const recorded = existsSync(file) ? readFileSync(file, "utf8").trim() : "";
  return process.env.ARTEMIS_STOMP_URL ?? (recorded || "stomp://127.0.0.1:61613");
}

interface Server {
  readonly child: ChildProcess;
  readonly base: string;
  output(): string;
}

function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(
    process.execPath,
    ["--conditions=factflow-source", "--import", "tsx", CLI, "serve", "--port", "0"],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        FACTFLOW_LOG_LEVEL: "warn",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let text = "";
  const collect = (chunk: Buffer) => {
    text = (text + chunk.toString("utf8")).slice(-20_000);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  return new Promise((done, fail) => {
    const timer = setInterval(() => {
      const match = /server listening on (http:\/\/\S+)/.exec(text);
      if (match !== null) {
        clearInterval(timer);
        done({ child, base: match[1] as string, output: () => text });
      } else if (child.exitCode !== null) {
        clearInterval(timer);
        fail(new Error(`[factflow/bench] a server exited before listening:\n${text}`));
      }
    }, 50);
  });
}

/** User + system CPU time of a process, in ms (Linux /proc). */
function cpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
  } catch {
    return 0;
  }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON answers of the API.
async function api(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined
      ? {}
      : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok)
    throw new Error(`[factflow/bench] ${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function round(provider: string, processes: number, executions: number, items: number) {
  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-scale-"));
  const configDir = join(dir, "configs");
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, "scale.yaml"),
    `name: scale
init:
  route: split
  message: { items: [] }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 8, prefetch: 16 }
    adapters: [{ type: passthrough }]
    outbound: [done.in]
  done:
    inbound: { queue: done.in, concurrency: 8, prefetch: 16 }
    adapters: [{ type: passthrough }]
`,
  );
  const database = await createScratchDatabase();
  const servers: Server[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      servers.push(
        await startServer({
          FACTFLOW_DATA_DIR: join(dir, `data-${i}`),
          FACTFLOW_CONFIG_DIR: configDir,
          FACTFLOW_PROVIDER: provider,
          FACTFLOW_DATABASE_URL: database.url,
          ...(provider === "artemis"
            ? { FACTFLOW_ARTEMIS_URL: artemisUrl() }
            : { FACTFLOW_RABBITMQ_URL: process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672" }),
        }),
      );
    }
    const cpuBefore = servers.map((s) => cpuMs(s.child.pid));
    const started = performance.now();
    const ids: string[] = [];
    for (let e = 0; e < executions; e++) {
      const server = servers[e % servers.length] as Server;
      const input = { items: Array.from({ length: items }, (_, n) => n) };
      ids.push((await api(server.base, "POST", "/api/v1/executions", { config: "scale", input })).id);
    }
    for (const id of ids) {
      for (;;) {
        const execution = await api((servers[0] as Server).base, "GET", `/api/v1/executions/${id}`);
        if (execution.status === "completed") break;
        if (execution.status !== "running")
          throw new Error(`[factflow/bench] execution ${id} ended ${execution.status}: ${execution.error}`);
        await sleep(20);
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const cpu = servers.reduce((sum, s, i) => sum + cpuMs(s.child.pid) - (cpuBefore[i] ?? 0), 0);
    const messages = executions * (1 + 2 * items);
    return { msgsPerSec: messages / seconds, cpuMsPerMsg: cpu / messages, messages, seconds };
  } finally {
    for (const s of servers) s.child.kill("SIGTERM");
    await Promise.all(
      servers.map((s) =>
        s.child.exitCode === null ? new Promise((done) => s.child.once("exit", done)) : undefined,
      ),
    );
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function run(args: string[]): Promise<void> {
  const provider = args[0] ?? "rabbitmq";
  if (provider !== "rabbitmq" && provider !== "artemis") {
    console.error(`[factflow/bench] scale runs on rabbitmq or artemis, not "${provider}"`);
    process.exitCode = 2;
    return;
  }
  const executions = Number(args[1] ?? 6);
  const items = Number(args[2] ?? 500);
  let baseline: number | undefined;
  for (const processes of [1, 2, 3]) {
    const r = await round(provider, processes, executions, items);
    baseline ??= r.msgsPerSec;
    console.log(
      JSON.stringify({
        bench: "scale",
        provider,
        processes,
        msgsPerSec: Math.round(r.msgsPerSec),
        cpuMsPerMsg: Math.round(r.cpuMsPerMsg * 1000) / 1000,
        speedup: Math.round((r.msgsPerSec / baseline) * 100) / 100,
        messages: r.messages,
        seconds: Math.round(r.seconds * 100) / 100,
      }),
    );
  }
}
