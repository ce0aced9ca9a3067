/**
 * `pnpm bench scale [provider] [executions] [items] [--providers a,b] [--processes 1,2,3]
 * [--handler-ms N] [--executions N] [--items N] [--warmup-items N] [--cpu-prof DIR]`: the same pipeline on 1, 2 and 3 (or `--processes`)
 * `factflow serve` processes sharing one broker (`rabbitmq`, `artemis`, `redis` or `pulsar`) and one
 * PostgreSQL (cluster mode, see docs/deployment.md). Each round gets a fresh database (and, on Redis,
 * a key prefix of its own), starts its servers, starts the executions round-robin through them, and
 * waits until every one has completed. Prints one JSON line per provider and process count:
 * `{"bench":"scale","provider",…,"processes":N,"msgsPerSec":…,"cpuMsPerMsg":…}`; the baseline is
 * the first round of the same provider in the same run (`speedup`, `cpuRatio`).
 *
 * The pipeline fans each execution's init message out into `items` items that pass two routes of
 * concurrency 8 per server. Without `--handler-ms` both routes pass messages straight on (the
 * servers' own cost per message; defaults 6 executions × 2000 items). With `--handler-ms N` each
 * handler of the two routes waits N ms first, as an HTTP or model call would, and the execution's
 * `max_handlers` is 8, so each server runs at most 8 handlers at once (defaults 1 execution × 3000
 * items): one server is bound by the wait, and servers add capacity where the machine's two cores
 * do not bound it.
 *
 * `--cpu-prof DIR` starts each server with `--cpu-prof`: it writes a V8 CPU profile under
 * `DIR/<provider>-<processes>/` when it exits (warm-up and idle sample included).
 *
 * A "message" is one delivery handled by a route: per execution, the init message plus every item
 * on each of the two routes after the fan-out. CPU is the servers' own user+system time (from
 * /proc), so the broker's and PostgreSQL's share of the machine is not in `cpuMsPerMsg`.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { Client } from "pg";
import { deleteRedisPrefix } from "./_redis-prefix.js";
import { createScratchDatabase } from "./_scratch-database.js";

const ROOT = resolve(import.meta.dirname, "..");
const CLI = resolve(ROOT, "apps/cli/src/bin.ts");
const CLOCK_TICK_MS = 10;
/** Handlers each server runs at once per route, and deliveries it may hold per route. */
const CONCURRENCY = 8;
/**
 * Items of each server's warm-up execution. V8 optimises a function only after it has run many
 * times: with a few dozen items, the measured round also paid for every server compiling the
 * delivery path, once per process, and more servers looked dearer per message for that alone.
 */
const WARMUP_ITEMS = 2000;
const PREFETCH = 16;
/** How long the servers' CPU is sampled while they hold no work. */
const IDLE_SAMPLE_MS = 3000;
/** How long PostgreSQL may take to publish its backends' transaction counts. */
const STATS_DELAY_MS = 1500;

const PROVIDERS = ["rabbitmq", "artemis", "redis", "pulsar"] as const;
type Provider = (typeof PROVIDERS)[number];

/** What a service script under `scripts/services` recorded (`<service>/<file>`), if anything. */
function recorded(service: string, file: string): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const path = join(base, service, file);
  return existsSync(path) ? readFileSync(path, "utf8").trim() || undefined : undefined;
}

const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";

/** The settings every server of a round gets for its broker (`redisPrefix`: the round's own keys). */
function providerEnv(provider: Provider, redisPrefix: string): Record<string, string> {
  switch (provider) {
    case "rabbitmq":
      return { FACTFLOW_RABBITMQ_URL: process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672" };
    case "artemis":
      return {
        FACTFLOW_ARTEMIS_URL:
          process.env.ARTEMIS_STOMP_URL ?? recorded("artemis", "stomp.url") ?? "stomp://127.0.0.1:61613",
      };
    case "redis":
      return { FACTFLOW_REDIS_URL: REDIS_URL, FACTFLOW_REDIS_KEY_PREFIX: redisPrefix };
    case "pulsar": {
      const ws = process.env.PULSAR_WS_URL ?? recorded("pulsar", "ws.url") ?? "ws://127.0.0.1:8080";
      const admin =
        process.env.PULSAR_ADMIN_URL ?? recorded("pulsar", "web.url") ?? ws.replace(/^ws/, "http");
      return { FACTFLOW_PULSAR_URL: ws, FACTFLOW_PULSAR_ADMIN_URL: admin };
    }
  }
}

interface Server {
  readonly child: ChildProcess;
  readonly base: string;
  output(): string;
}

function startServer(env: Record<string, string>, profileDir?: string): Promise<Server> {
  const profile = profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`];
  const child = spawn(
    process.execPath,
    [...profile, "--conditions=factflow-source", "--import", "tsx", CLI, "serve", "--port", "0"],
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

/** User and system CPU time of a process, in ms (Linux /proc). */
function cpuSplit(pid: number | undefined): { user: number; system: number } {
  if (pid === undefined) return { user: 0, system: 0 };
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return { user: Number(fields[11]) * CLOCK_TICK_MS, system: Number(fields[12]) * CLOCK_TICK_MS };
  } catch {
    return { user: 0, system: 0 };
  }
}

/** User + system CPU time of a process, in ms. */
function cpuMs(pid: number | undefined): number {
  const { user, system } = cpuSplit(pid);
  return user + system;
}

/** Read and write system calls of a process so far (Linux /proc): its socket round trips. */
function syscalls(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const io = readFileSync(`/proc/${pid}/io`, "utf8");
    return Number(/syscr: (\d+)/.exec(io)?.[1] ?? 0) + Number(/syscw: (\d+)/.exec(io)?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The machine's CPU time so far, in clock ticks: busy (every process) and total (Linux /proc/stat). */
function machineCpu(): { busy: number; total: number } {
  try {
    const fields = (readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "").trim().split(/\s+/).slice(1);
    const ticks = fields.map(Number);
    const total = ticks.reduce((sum, t) => sum + t, 0);
    // idle and iowait
    return { busy: total - (ticks[3] ?? 0) - (ticks[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/**
 * Context switches of a process's main thread so far (Linux /proc): `woken`, the times it blocked
 * waiting for an event (each one wake-up of its event loop), and `preempted`, the times the
 * scheduler took the core from it while it could still run.
 */
function switches(pid: number | undefined): { woken: number; preempted: number } {
  if (pid === undefined) return { woken: 0, preempted: 0 };
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return {
      woken: Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0),
      preempted: Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0),
    };
  } catch {
    return { woken: 0, preempted: 0 };
  }
}

/** Statements and transactions PostgreSQL has counted on a database so far (its statistics views). */
async function databaseCalls(url: string): Promise<number> {
  const client = new Client({ connectionString: url });
  client.on("error", () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>(
      "SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()",
    );
    return Number(rows[0]?.n ?? 0);
  } finally {
    await client.end();
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

interface Round {
  readonly provider: Provider;
  readonly processes: number;
  readonly executions: number;
  readonly items: number;
  /** How long each handler of the two routes after the fan-out waits; 0 passes straight on. */
  readonly handlerMs: number;
  /** Items of the execution each server runs before the clock starts. */
  readonly warmupItems: number;
  /** Where each server writes a V8 CPU profile when it exits (`--cpu-prof DIR`), if anywhere. */
  readonly profileDir: string | undefined;
}

/** A route's adapter: a wait of `handlerMs` (an HTTP or model call) or a passthrough. */
function handlerOf(handlerMs: number): string {
  return handlerMs > 0 ? `{ type: delay, config: { ms: ${handlerMs} } }` : "{ type: passthrough }";
}

/** Starts one execution per input, round-robin through the servers, and waits until all completed. */
async function runExecutions(servers: readonly Server[], inputs: readonly unknown[]): Promise<void> {
  const ids: string[] = [];
  for (const [e, input] of inputs.entries()) {
    const server = servers[e % servers.length] as Server;
    ids.push((await api(server.base, "POST", "/api/v1/executions", { config: "scale", input })).id);
  }
  // The end is watched through the execution list, filtered by status: that read costs the same
  // whatever an execution holds, where `GET /executions/{id}` also counts its lineage rows per route
  // and status, a scan that grows with the execution and, every 20 ms, took a share of PostgreSQL's
  // and the first server's CPU that the round then counted.
  const base = (servers[0] as Server).base;
  for (;;) {
    const running = await api(base, "GET", "/api/v1/executions?config=scale&status=running&limit=1");
    if (running.total === 0) break;
    await sleep(20);
  }
  for (const id of ids) {
    const execution = await api(base, "GET", `/api/v1/executions/${id}`);
    if (execution.status !== "completed")
      throw new Error(`[factflow/bench] execution ${id} ended ${execution.status}: ${execution.error}`);
  }
}

async function round({ provider, processes, executions, items, handlerMs, warmupItems, profileDir }: Round) {
  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-scale-"));
  const configDir = join(dir, "configs");
  mkdirSync(configDir, { recursive: true });
  writeFileSync(
    join(configDir, "scale.yaml"),
    `name: scale
${handlerMs > 0 ? `settings: { max_handlers: ${CONCURRENCY} }\n` : ""}init:
  route: split
  message: { items: [] }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: ${CONCURRENCY}, prefetch: ${PREFETCH} }
    adapters: [${handlerOf(handlerMs)}]
    outbound: [done.in]
  done:
    inbound: { queue: done.in, concurrency: ${CONCURRENCY}, prefetch: ${PREFETCH} }
    adapters: [${handlerOf(handlerMs)}]
`,
  );
  const redisPrefix = `ffbench-scale-${randomBytes(4).toString("hex")}:`;
  const database = await createScratchDatabase();
  const servers: Server[] = [];
  try {
    for (let i = 0; i < processes; i++) {
      servers.push(
        await startServer(
          {
            FACTFLOW_DATA_DIR: join(dir, `data-${i}`),
            FACTFLOW_CONFIG_DIR: configDir,
            FACTFLOW_PROVIDER: provider,
            FACTFLOW_DATABASE_URL: database.url,
            ...providerEnv(provider, redisPrefix),
          },
          profileDir === undefined ? undefined : join(profileDir, `${provider}-${processes}`),
        ),
      );
    }
    // Not measured: one small execution started through each server, so every process has loaded
    // and compiled the code a delivery runs before the clock starts (a cost per process, not per
    // message), then the servers' CPU over an idle while (discovery, heartbeats, polls).
    await runExecutions(
      servers,
      servers.map(() => ({ items: Array.from({ length: warmupItems }, (_, n) => n) })),
    );
    const idleBefore = servers.map((s) => cpuMs(s.child.pid));
    await sleep(IDLE_SAMPLE_MS);
    const idle = servers.reduce((sum, s, i) => sum + cpuMs(s.child.pid) - (idleBefore[i] ?? 0), 0);
    const cpuBefore = servers.map((s) => cpuSplit(s.child.pid));
    const callsBefore = servers.map((s) => syscalls(s.child.pid));
    const switchesBefore = servers.map((s) => switches(s.child.pid));
    const machineBefore = machineCpu();
    const xactsBefore = await databaseCalls(database.url);
    const started = performance.now();
    await runExecutions(
      servers,
      Array.from({ length: executions }, () => ({ items: Array.from({ length: items }, (_, n) => n) })),
    );
    const seconds = (performance.now() - started) / 1000;
    const cpuAfter = servers.map((s) => cpuSplit(s.child.pid));
    const userMs = cpuAfter.reduce((sum, c, i) => sum + c.user - (cpuBefore[i]?.user ?? 0), 0);
    const systemMs = cpuAfter.reduce((sum, c, i) => sum + c.system - (cpuBefore[i]?.system ?? 0), 0);
    const cpu = userMs + systemMs;
    const calls = servers.reduce((sum, s, i) => sum + syscalls(s.child.pid) - (callsBefore[i] ?? 0), 0);
    const machineAfter = machineCpu();
    const switchesAfter = servers.map((s) => switches(s.child.pid));
    const woken = switchesAfter.reduce((sum, c, i) => sum + c.woken - (switchesBefore[i]?.woken ?? 0), 0);
    const preempted = switchesAfter.reduce(
      (sum, c, i) => sum + c.preempted - (switchesBefore[i]?.preempted ?? 0),
      0,
    );
    // PostgreSQL publishes a backend's counts when it goes idle, at most once a second.
    await sleep(STATS_DELAY_MS);
    const xacts = (await databaseCalls(database.url)) - xactsBefore;
    const messages = executions * (1 + 2 * items);
    return {
      msgsPerSec: messages / seconds,
      cpuMsPerMsg: cpu / messages,
      systemShare: systemMs / Math.max(1, cpu),
      syscallsPerMsg: calls / messages,
      wakeupsPerMsg: woken / messages,
      preemptionsPerMsg: preempted / messages,
      machineBusy:
        (machineAfter.busy - machineBefore.busy) / Math.max(1, machineAfter.total - machineBefore.total),
      dbXactsPerMsg: xacts / messages,
      idleCpuMsPerServerSec: idle / processes / (IDLE_SAMPLE_MS / 1000),
      messages,
      seconds,
    };
  } finally {
    for (const s of servers) s.child.kill("SIGTERM");
    await Promise.all(
      servers.map((s) =>
        s.child.exitCode === null ? new Promise((done) => s.child.once("exit", done)) : undefined,
      ),
    );
    await database.drop();
    if (provider === "redis") await deleteRedisPrefix(REDIS_URL, redisPrefix);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Comma-separated numbers, e.g. `1,3`. */
function numbers(text: string): number[] {
  return text.split(",").map((n) => Number(n.trim()));
}

export async function run(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      providers: { type: "string" },
      processes: { type: "string", default: "1,2,3" },
      "handler-ms": { type: "string", default: "0" },
      executions: { type: "string" },
      items: { type: "string" },
      "cpu-prof": { type: "string" },
      "warmup-items": { type: "string" },
    },
  });
  const providers = (values.providers ?? positionals[0] ?? "rabbitmq").split(",").map((p) => p.trim());
  const unknown = providers.find((p) => !(PROVIDERS as readonly string[]).includes(p));
  if (unknown !== undefined) {
    console.error(`[factflow/bench] scale runs on ${PROVIDERS.join(", ")}, not "${unknown}"`);
    process.exitCode = 2;
    return;
  }
  const handlerMs = Number(values["handler-ms"]);
  // With waiting handlers a server runs 8 at once per execution: one execution, so 8 per server.
  const executions = Number(values.executions ?? positionals[1] ?? (handlerMs > 0 ? 1 : 6));
  const items = Number(values.items ?? positionals[2] ?? (handlerMs > 0 ? 3000 : 2000));
  const counts = numbers(values.processes);
  const warmupItems = Number(values["warmup-items"] ?? WARMUP_ITEMS);
  const invalid = [executions, items, handlerMs, warmupItems, ...counts].some(
    (n) => !Number.isInteger(n) || n < 0,
  );
  if (invalid || counts.some((n) => n < 1)) {
    console.error(
      "[factflow/bench] scale: executions, items, --handler-ms and --processes take whole numbers",
    );
    process.exitCode = 2;
    return;
  }
  for (const provider of providers as Provider[]) {
    let baseline: { msgsPerSec: number; cpuMsPerMsg: number } | undefined;
    for (const processes of counts) {
      const r = await round({
        provider,
        processes,
        executions,
        items,
        handlerMs,
        warmupItems,
        profileDir: values["cpu-prof"] === undefined ? undefined : resolve(values["cpu-prof"]),
      });
      baseline ??= r;
      console.log(
        JSON.stringify({
          bench: "scale",
          provider,
          processes,
          handlerMs,
          concurrency: CONCURRENCY,
          msgsPerSec: Math.round(r.msgsPerSec),
          cpuMsPerMsg: Math.round(r.cpuMsPerMsg * 1000) / 1000,
          speedup: Math.round((r.msgsPerSec / baseline.msgsPerSec) * 100) / 100,
          cpuRatio: Math.round((r.cpuMsPerMsg / baseline.cpuMsPerMsg) * 100) / 100,
          syscallsPerMsg: Math.round(r.syscallsPerMsg * 100) / 100,
          dbXactsPerMsg: Math.round(r.dbXactsPerMsg * 100) / 100,
          wakeupsPerMsg: Math.round(r.wakeupsPerMsg * 100) / 100,
          preemptionsPerMsg: Math.round(r.preemptionsPerMsg * 100) / 100,
          systemShare: Math.round(r.systemShare * 100) / 100,
          machineBusy: Math.round(r.machineBusy * 100) / 100,
          idleCpuMsPerServerSec: Math.round(r.idleCpuMsPerServerSec),
          messages: r.messages,
          seconds: Math.round(r.seconds * 100) / 100,
        }),
      );
    }
  }
}
