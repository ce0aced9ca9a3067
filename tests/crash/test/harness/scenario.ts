import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FactflowProcess, sleep, startServer } from "./factflow-process.js";
import { api } from "./http.js";
import { checkLineage, type LineageCheck, lineageSummary } from "./lineage.js";
import {
  countSink,
  DUPLICATE_BOUND_PER_KILL,
  PIPELINE,
  QUEUES,
  type SinkCount,
  sinkLines,
  writePipeline,
} from "./pipeline.js";
import { type LogDamage, liveMessages } from "./queue-log.js";
import { type QueueLeftovers, queueLeftovers, removeLeftovers } from "./queues.js";
import { RABBITMQ_URL } from "./services.js";

/** Generous: the machine may be busy. Nothing asserts an upper bound on time. */
const PROGRESS_DEADLINE_MS = 120_000;
const END_DEADLINE_MS = 120_000;

/** A scenario that runs the pipeline on a `factflow serve` process and kills it. */
export interface ServerScenario {
  readonly name: string;
  readonly provider: "embedded" | "rabbitmq";
  /** Lineage in this PostgreSQL database instead of PGlite under the data directory. */
  readonly databaseUrl?: string;
  /** Fractions of the items the sink has written at which the server gets `kill -9`, in order. */
  readonly killAt: readonly number[];
  /** Done to the embedded queue log while the server is down after the last kill. */
  readonly damage?: (queueLog: string) => LogDamage;
}

/** What one scenario measured. */
export interface ScenarioResult {
  readonly name: string;
  readonly executionId: string;
  readonly status: string;
  readonly sink: SinkCount;
  /** Most duplicates the kills may cause (see DUPLICATE_BOUND_PER_KILL). */
  readonly bound: number;
  readonly leftovers: QueueLeftovers;
  /** What the execution's lineage holds against what every item must have left. */
  readonly lineage: LineageCheck;
  /** From the last restart being ready (resumed) to the execution having ended. */
  readonly endedMs: number;
  /** Sink lines when each kill landed. */
  readonly killedAt: readonly number[];
  /** Duplicates the engine itself recognised and skipped (its `<route>.duplicates` counters). */
  readonly engineDuplicates: number;
  /** `/readyz` status after the restart (`degraded` when the queue log was damaged). */
  readonly readiness: string;
  readonly notes: readonly string[];
  /** The scenario's directory (kept when an assertion fails) and a dump for the failure message. */
  readonly dir: string;
  readonly diagnostics: string;
}

/** `[crash] <scenario>: items N, lost L, duplicates D (bound B), queue leftovers Q, ended in T ms`. */
export function summaryLine(r: ScenarioResult): string {
  const extra = [
    `status ${r.status}`,
    `killed at ${r.killedAt.join("+")} sink lines`,
    `queues deleted ${r.leftovers.deleted}/${QUEUES.length}`,
    `engine skipped ${r.engineDuplicates} duplicates`,
    `readyz ${r.readiness}`,
    lineageSummary(r.lineage),
    ...r.notes,
  ];
  return `[crash] ${r.name}: items ${PIPELINE.items}, lost ${r.sink.lost}, duplicates ${r.sink.duplicates} (bound ${r.bound}), queue leftovers ${r.leftovers.messages}, ended in ${r.endedMs} ms (${extra.join("; ")})`;
}

interface Workspace {
  readonly dir: string;
  readonly dataDir: string;
  readonly configDir: string;
  readonly sinkFile: string;
  readonly pipelineFile: string;
}

let template: Promise<string> | undefined;

/**
 * A PGlite database with the lineage migrations applied, made once by a server that then stopped
 * cleanly. Creating one costs several seconds per start; each scenario starts from a copy instead.
 */
function pgliteTemplate(): Promise<string> {
  template ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-crash-template-"));
    const env = { FACTFLOW_DATA_DIR: join(dir, "data"), FACTFLOW_CONFIG_DIR: join(dir, "configs") };
    const { server } = await startServer(env);
    await server.stop();
    if (server.child.exitCode !== 0)
      throw new Error(`the template server exited ${server.child.exitCode}\n${server.tail()}`);
    return dir;
  })();
  return template;
}

/** Removes the PGlite template, if one was made. */
export async function removeTemplate(): Promise<void> {
  const dir = await template?.catch(() => undefined);
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
}

async function workspace(name: string, withPglite: boolean): Promise<Workspace> {
  const dir = mkdtempSync(join(tmpdir(), `factflow-crash-${name.replace(/[^a-z0-9]+/gi, "-")}-`));
  const configDir = join(dir, "configs");
  const sinkFile = join(dir, "sink.lines");
  const dataDir = join(dir, "data");
  if (withPglite)
    cpSync(join(await pgliteTemplate(), "data", "pglite"), join(dataDir, "pglite"), { recursive: true });
  return { dir, dataDir, configDir, sinkFile, pipelineFile: writePipeline(configDir, sinkFile) };
}

/** Removes a scenario's directory; kept (and named in the failure) when the scenario failed. */
export function cleanUp(result: ScenarioResult): void {
  rmSync(result.dir, { recursive: true, force: true });
}

/** Waits until the sink has written `lines` lines; fails when `alive()` turns false or time runs out. */
async function waitForSink(ws: Workspace, lines: number, alive: () => boolean, tail: () => string) {
  const started = Date.now();
  for (;;) {
    const written = sinkLines(ws.sinkFile);
    if (written >= lines) return written;
    if (!alive())
      throw new Error(
        `the process ended before the sink reached ${lines} lines (it has ${written})\n${tail()}`,
      );
    if (Date.now() - started > PROGRESS_DEADLINE_MS) {
      throw new Error(
        `the sink did not reach ${lines} lines within ${PROGRESS_DEADLINE_MS} ms (it has ${written})\n${tail()}`,
      );
    }
    await sleep(5);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: the execution detail is read as JSON.
async function waitForEnd(base: string, id: string, server: FactflowProcess): Promise<any> {
  const started = Date.now();
  for (;;) {
    const execution = await api(base, "GET", `/api/v1/executions/${id}`);
    if (execution.status !== "running") return execution;
    if (!server.running)
      throw new Error(`the server exited while execution ${id} was running\n${server.tail()}`);
    if (Date.now() - started > END_DEADLINE_MS) {
      throw new Error(`execution ${id} did not end within ${END_DEADLINE_MS} ms after the restart`);
    }
    await sleep(200);
  }
}

/** Everything worth seeing when a scenario fails. */
async function diagnose(
  base: string | undefined,
  id: string | undefined,
  ws: Workspace,
  server?: FactflowProcess,
) {
  const parts = [`scenario directory (kept): ${ws.dir}`, `sink: ${JSON.stringify(countSink(ws.sinkFile))}`];
  if (base !== undefined && id !== undefined && server?.running === true) {
    try {
      const execution = await api(base, "GET", `/api/v1/executions/${id}`);
      parts.push(
        `execution: status ${execution.status}, error ${JSON.stringify(execution.error)}, counters ${JSON.stringify(execution.counters)}`,
      );
      parts.push(`routes: ${JSON.stringify(execution.routes)}`);
      for (const queue of QUEUES) {
        const destination = encodeURIComponent(`/queue/${id}/${queue}`);
        parts.push(
          `${queue}: ${JSON.stringify(await api(base, "GET", `/api/v1/queues/stats?destination=${destination}`))}`,
        );
      }
      parts.push(`counters: ${JSON.stringify(await api(base, "GET", "/api/v1/queues/counters"))}`);
    } catch (error) {
      parts.push(`(could not read the server: ${(error as Error).message})`);
    }
  }
  if (server !== undefined) parts.push(server.tail(60));
  return parts.join("\n");
}

function engineDuplicates(counters: unknown): number {
  if (counters === null || typeof counters !== "object") return 0;
  let total = 0;
  for (const [key, value] of Object.entries(counters)) {
    if (key.endsWith(".duplicates") && typeof value === "number") total += value;
  }
  return total;
}

async function readiness(base: string): Promise<string> {
  const response = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) });
  const body = (await response.json()) as { status?: string; problems?: string[] };
  return `${body.status ?? response.status}${body.problems?.length ? ` (${body.problems.join("; ")})` : ""}`;
}

/**
 * Starts a server, starts the execution, `kill -9`s the server each time the sink reaches one of
 * `killAt`, restarts it on the same data directory (resuming through the API on RabbitMQ, where the
 * server does not resume by itself), waits for the end and counts.
 */
export async function runServerScenario(scenario: ServerScenario): Promise<ScenarioResult> {
  const ws = await workspace(scenario.name, scenario.databaseUrl === undefined);
  const env: Record<string, string> = {
    FACTFLOW_DATA_DIR: ws.dataDir,
    FACTFLOW_CONFIG_DIR: ws.configDir,
    FACTFLOW_PROVIDER: scenario.provider,
    FACTFLOW_EMBEDDED_MODE: "file",
    ...(scenario.provider === "rabbitmq" ? { FACTFLOW_RABBITMQ_URL: RABBITMQ_URL } : {}),
    ...(scenario.databaseUrl === undefined ? {} : { FACTFLOW_DATABASE_URL: scenario.databaseUrl }),
  };
  let { server, base } = await startServer(env);
  let id: string | undefined;
  try {
    id = ((await api(base, "POST", "/api/v1/executions", { config: PIPELINE.name })) as { id: string }).id;
    const killedAt: number[] = [];
    const notes: string[] = [];
    let ready = 0;
    for (const [index, fraction] of scenario.killAt.entries()) {
      const current = server;
      await waitForSink(
        ws,
        Math.ceil(fraction * PIPELINE.items),
        () => current.running,
        () => current.tail(),
      );
      await current.kill9();
      killedAt.push(sinkLines(ws.sinkFile));
      if (index === scenario.killAt.length - 1 && scenario.damage !== undefined) {
        notes.push(scenario.damage(join(ws.dataDir, "queue", "queue.log")).description);
      }
      ({ server, base } = await startServer(env));
      // The embedded server resumes executions left running by itself; with a broker shared by
      // several servers it cannot know nobody else runs them, so the operator resumes.
      if (scenario.provider === "rabbitmq") await api(base, "POST", `/api/v1/executions/${id}/resume`);
      ready = Date.now();
    }
    const execution = await waitForEnd(base, id, server);
    const endedMs = Date.now() - ready;
    const leftovers = await queueLeftovers(base, id, scenario.provider);
    const lineage = await checkLineage(base, id);
    const diagnostics = await diagnose(base, id, ws, server);
    if (leftovers.messages > 0 && scenario.provider === "embedded") {
      notes.push(...liveMessages(join(ws.dataDir, "queue", "queue.log"), id));
    }
    if (leftovers.messages > 0 || leftovers.deleted < QUEUES.length) {
      notes.push(`removed ${await removeLeftovers(base, id)} leftover queues after measuring`);
    }
    const result: ScenarioResult = {
      name: scenario.name,
      executionId: id,
      status: execution.status,
      sink: countSink(ws.sinkFile),
      bound: DUPLICATE_BOUND_PER_KILL * scenario.killAt.length,
      leftovers,
      lineage,
      endedMs,
      killedAt,
      engineDuplicates: engineDuplicates(execution.counters),
      readiness: await readiness(base),
      notes: [...leftovers.details, ...notes],
      dir: ws.dir,
      diagnostics,
    };
    await server.stop();
    return result;
  } catch (error) {
    const diagnostics = await diagnose(base, id, ws, server);
    // Never leave it running in the shared database: a later embedded server would resume it.
    if (id !== undefined && server.running) {
      await api(base, "POST", `/api/v1/executions/${id}/cancel`).catch(() => undefined);
    }
    await server.kill9();
    throw new Error(`[crash] ${scenario.name} failed: ${(error as Error).message}\n${diagnostics}`);
  }
}

/**
 * `factflow run` killed with `kill -9`, then `factflow executions resume ID` in process on the same
 * data directory (no server). A server started afterwards on that directory reports the queues.
 */
export async function runCliScenario(name: string, fraction: number): Promise<ScenarioResult> {
  const ws = await workspace(name, true);
  const env: Record<string, string> = {
    FACTFLOW_DATA_DIR: ws.dataDir,
    FACTFLOW_CONFIG_DIR: ws.configDir,
    // `run` may load modules from the pipeline's own directory; `resume` from the configured ones.
    FACTFLOW_ADAPTER_DIRS: ws.configDir,
    FACTFLOW_EMBEDDED_MODE: "file",
  };
  const run = new FactflowProcess(["run", ws.pipelineFile], env);
  let resume: FactflowProcess | undefined;
  let id: string | undefined;
  try {
    id = (await run.waitFor(/as execution (\S+)/, "starting the execution"))[1] as string;
    await waitForSink(
      ws,
      Math.ceil(fraction * PIPELINE.items),
      () => run.running,
      () => run.tail(),
    );
    await run.kill9();
    const killedAt = [sinkLines(ws.sinkFile)];
    const started = Date.now();
    resume = new FactflowProcess(["executions", "resume", id], env);
    const timer = setTimeout(() => resume?.child.kill("SIGKILL"), END_DEADLINE_MS + 60_000);
    const code = await resume.exited;
    clearTimeout(timer);
    const endedMs = Date.now() - started;
    if (code !== 0) throw new Error(`factflow executions resume exited ${code}\n${resume.tail()}`);
    const { server, base } = await startServer(env);
    try {
      const execution = await api(base, "GET", `/api/v1/executions/${id}`);
      const leftovers = await queueLeftovers(base, id, "embedded");
      const result: ScenarioResult = {
        name,
        executionId: id,
        status: execution.status,
        sink: countSink(ws.sinkFile),
        bound: DUPLICATE_BOUND_PER_KILL,
        leftovers,
        lineage: await checkLineage(base, id),
        endedMs,
        killedAt,
        engineDuplicates: engineDuplicates(execution.counters),
        readiness: await readiness(base),
        notes: [
          `resume printed ${JSON.stringify(resume.stdout().trim().split("\n")[0] ?? "")}`,
          ...leftovers.details,
        ],
        dir: ws.dir,
        diagnostics: await diagnose(base, id, ws, server),
      };
      return result;
    } finally {
      await server.stop();
    }
  } catch (error) {
    await run.kill9();
    await resume?.kill9();
    throw new Error(
      `[crash] ${name} failed: ${(error as Error).message}\n${await diagnose(undefined, id, ws)}\n${resume?.tail() ?? run.tail()}`,
    );
  }
}
