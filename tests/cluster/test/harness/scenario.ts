import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type FactflowProcess, sleep, startServer } from "../../../crash/test/harness/factflow-process.js";
import { api } from "../../../crash/test/harness/http.js";
import {
  countSink,
  DUPLICATE_BOUND_PER_EXECUTION,
  inputOf,
  PIPELINE,
  type SinkCount,
  sinkLines,
  writePipeline,
} from "./pipeline.js";
import {
  ARTEMIS_URL,
  dropRedisPrefix,
  PULSAR_ADMIN_URL,
  PULSAR_WS_URL,
  pulsarLeftovers,
  RABBITMQ_URL,
  REDIS_URL,
  rabbitQueues,
  redisLeftovers,
} from "./services.js";

/** The cluster lease the servers run with (shorter than the default 10 s: the takeover comes sooner). */
export const LEASE_MS = 5000;

/** What a server logs when it claims the lease of a dead one. */
const TAKEOVER = /took over after a server whose lease expired/;

/** Generous: the machine may be busy. Nothing asserts an upper bound on time. */
const END_DEADLINE_MS = 300_000;
const PROGRESS_DEADLINE_MS = 180_000;

export interface ClusterScenario {
  readonly name: string;
  readonly provider: "rabbitmq" | "artemis" | "redis" | "pulsar";
  readonly databaseUrl: string;
  readonly servers: number;
  readonly executions: number;
  readonly items: number;
  /** Fraction of all items sunk at which server 1 gets `kill -9` (restarted a little later). */
  readonly killAt?: number;
}

export interface ClusterResult {
  readonly name: string;
  readonly statuses: Record<string, number>;
  readonly sink: SinkCount;
  readonly bound: number;
  /** Per watched execution: the terminal events its SSE stream (on another server) reported. */
  readonly sseTerminal: string[][];
  readonly killedAt: number | undefined;
  readonly endedMs: number;
  /**
   * Messages left in the executions' queues, asked of the broker itself: ready or unacked on
   * RabbitMQ, stream entries under the scenario's key prefix on Redis, subscription backlogs on
   * Pulsar; undefined on Artemis (no broker-side count is read there).
   */
  readonly leftovers: number | undefined;
  /** From the `kill -9` to the last execution's `finishedAt`; undefined without a kill. */
  readonly killToLastCompletionMs: number | undefined;
  /** Takeovers the servers logged ("took over after a server whose lease expired"). */
  readonly takeovers: number;
  /** Messages the takers re-published (left open by the dead server). */
  readonly republished: number;
  /** Servers whose `GET /api/v1/queues/sink.in` showed the definition `PUT` on server 0. */
  readonly definitionsAgree: number;
  readonly servers: number;
  readonly dir: string;
  readonly diagnostics: string;
}

/** `[cluster] <name>: executions N completed C, items I, lost L, duplicates D (bound B), ...`. */
export function summaryLine(r: ClusterResult, s: ClusterScenario): string {
  const completed = r.statuses.completed ?? 0;
  const sseOk = r.sseTerminal.filter((t) => t.length === 1 && t[0] === "completed").length;
  return `[cluster] ${r.name}: executions ${s.executions} completed ${completed}, items ${s.executions * s.items}, lost ${r.sink.lost}, duplicates ${r.sink.duplicates} (bound ${r.bound}), unexpected ${r.sink.unexpected}, one SSE completed on another server ${sseOk}/${r.sseTerminal.length}, ${r.killedAt === undefined ? "no kill" : `server killed -9 at ${r.killedAt} sink lines`}, queue leftovers ${r.leftovers ?? "n/a"}, ${r.killToLastCompletionMs === undefined ? "" : `kill to last completion ${r.killToLastCompletionMs} ms (lease ${LEASE_MS} ms), `}takeovers ${r.takeovers}, re-published ${r.republished}, queue definition on ${r.definitionsAgree}/${r.servers} servers, ended in ${r.endedMs} ms`;
}

interface Server {
  process: FactflowProcess;
  base: string;
}

/** Reads an execution's SSE stream until its terminal event (or `signal`); returns the terminal types. */
async function watchEvents(base: string, id: string, signal: AbortSignal): Promise<string[]> {
  const terminal: string[] = [];
  try {
    const response = await fetch(`${base}/api/v1/executions/${id}/events`, { signal });
    if (!response.ok || response.body === null) return [`http ${response.status}`];
    const decoder = new TextDecoder();
    let text = "";
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      for (let end = text.indexOf("\n"); end !== -1; end = text.indexOf("\n")) {
        const line = text.slice(0, end).trim();
        text = text.slice(end + 1);
        const type = /^event:\s*(\S+)/.exec(line)?.[1];
        if (type === "completed" || type === "failed" || type === "cancelled") terminal.push(type);
      }
    }
  } catch (error) {
    if (!signal.aborted) terminal.push(`error ${(error as Error).message}`);
  }
  return terminal;
}

/**
 * Starts `servers` servers on one broker and one database, starts the executions round-robin
 * through them, optionally kills server 1 with -9 and starts it again, waits for every execution to
 * end and counts the sink file.
 */
export async function runClusterScenario(scenario: ClusterScenario): Promise<ClusterResult> {
  const dir = mkdtempSync(join(tmpdir(), `factflow-cluster-${scenario.name.replace(/[^a-z0-9]+/gi, "-")}-`));
  const configDir = join(dir, "configs");
  // Redis keys of this scenario only, so other runs on the same Redis never meet them.
  const redisPrefix = `ffcluster-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}:`;
  const sinkFile = join(dir, "sink.lines");
  writePipeline(configDir, sinkFile);
  const envOf = (index: number): Record<string, string> => ({
    FACTFLOW_DATA_DIR: join(dir, `data-${index}`),
    FACTFLOW_CONFIG_DIR: configDir,
    FACTFLOW_PROVIDER: scenario.provider,
    FACTFLOW_DATABASE_URL: scenario.databaseUrl,
    FACTFLOW_CLUSTER_LEASE_MS: String(LEASE_MS),
    ...providerEnv(scenario.provider, redisPrefix),
  });
  const servers: Server[] = [];
  /** Servers replaced by a restart (their output is still read). */
  const retired: Server[] = [];
  const ids: string[] = [];
  const watchers = new AbortController();
  const total = scenario.executions * scenario.items;
  const diagnose = async (): Promise<string> => {
    const parts = [`scenario directory (kept): ${dir}`];
    parts.push(`sink: ${JSON.stringify(countSink(sinkFile, scenario.executions, scenario.items))}`);
    const alive = servers.find((s) => s.process.running);
    if (alive !== undefined) {
      for (const id of ids) {
        try {
          const e = await api(alive.base, "GET", `/api/v1/executions/${id}`);
          if (e.status !== "completed")
            parts.push(`${id}: ${e.status} ${JSON.stringify(e.error)} routes ${JSON.stringify(e.routes)}`);
        } catch (error) {
          parts.push(`${id}: ${(error as Error).message}`);
        }
      }
    }
    for (const [i, s] of servers.entries()) parts.push(`server ${i}:\n${s.process.tail(25)}`);
    // Every server's whole output stays in the scenario directory (removed only when the test passes).
    for (const [i, s] of retired.entries())
      writeFileSync(join(dir, `server-killed-${i}.log`), s.process.stderr() + s.process.stdout());
    for (const [i, s] of servers.entries())
      writeFileSync(join(dir, `server-${i}.log`), s.process.stderr() + s.process.stdout());
    return parts.join("\n");
  };
  try {
    const started = await Promise.allSettled(
      Array.from({ length: scenario.servers }, (_, i) => startServer(envOf(i))),
    );
    for (const s of started)
      if (s.status === "fulfilled") servers.push({ process: s.value.server, base: s.value.base });
    const refused = started.find((s) => s.status === "rejected");
    if (refused !== undefined) throw (refused as PromiseRejectedResult).reason;

    // A named queue definition sent to one server is the one every server answers with (it lives in
    // PostgreSQL). The same settings as the pipeline's own, so the run itself is unchanged.
    const definition = { concurrency: PIPELINE.sink.concurrency, prefetch: PIPELINE.sink.prefetch };
    await api((servers[0] as Server).base, "PUT", "/api/v1/queues/sink.in/definition", definition);
    let definitionsAgree = 0;
    for (const s of servers) {
      const named = await api(s.base, "GET", "/api/v1/queues/sink.in");
      if (JSON.stringify(named.definition) === JSON.stringify(definition)) definitionsAgree++;
    }

    // All at once, round-robin over the servers, so the kill lands while they all run.
    const created = await Promise.all(
      Array.from({ length: scenario.executions }, (_, i) =>
        api((servers[i % servers.length] as Server).base, "POST", "/api/v1/executions", {
          config: PIPELINE.name,
          input: inputOf(i, scenario.items),
        }),
      ),
    );
    ids.push(...created.map((c) => c.id as string));
    // Each execution watched on a server that did not start it (and is never killed).
    const killed = scenario.killAt === undefined ? -1 : 1;
    const watched = ids.map((id, i) => {
      let at = (i + 1) % servers.length;
      if (at === killed) at = (at + 1) % servers.length;
      if (at === i % servers.length) at = (at + 1) % servers.length;
      return watchEvents((servers[at] as Server).base, id, watchers.signal);
    });

    let killedAt: number | undefined;
    let killedAtMs: number | undefined;
    let ready = Date.now();
    if (scenario.killAt !== undefined) {
      const victim = servers[killed] as Server;
      const target = Math.ceil(scenario.killAt * total);
      const waitStart = Date.now();
      while (sinkLines(sinkFile) < target) {
        if (Date.now() - waitStart > PROGRESS_DEADLINE_MS)
          throw new Error(`the sink did not reach ${target} lines (it has ${sinkLines(sinkFile)})`);
        if (!victim.process.running)
          throw new Error(`server ${killed} exited by itself\n${victim.process.tail()}`);
        await sleep(5);
      }
      killedAt = sinkLines(sinkFile);
      killedAtMs = Date.now();
      await victim.process.kill9();
      // "Restarted later": the others carry on alone for a while first.
      await sleep(3000);
      const restarted = await startServer(envOf(killed));
      retired.push(victim);
      servers[killed] = { process: restarted.server, base: restarted.base };
      ready = Date.now();
    }

    const main = servers[0] as Server;
    const statuses: Record<string, number> = {};
    let lastFinished = 0;
    const waitStart = Date.now();
    for (const id of ids) {
      for (;;) {
        const execution = await api(main.base, "GET", `/api/v1/executions/${id}`);
        if (execution.status !== "running") {
          statuses[execution.status] = (statuses[execution.status] ?? 0) + 1;
          if (typeof execution.finished_at === "string")
            lastFinished = Math.max(lastFinished, Date.parse(execution.finished_at));
          break;
        }
        if (Date.now() - waitStart > END_DEADLINE_MS)
          throw new Error(`execution ${id} did not end within ${END_DEADLINE_MS} ms`);
        await sleep(250);
      }
    }
    const endedMs = Date.now() - ready;
    // Give the streams a moment to deliver their terminal event, then stop them.
    const sseTerminal = await Promise.race([
      Promise.all(watched),
      sleep(20_000).then(() => {
        watchers.abort();
        return Promise.all(watched);
      }),
    ]);
    let leftovers: number | undefined;
    if (scenario.provider !== "artemis") await sleep(2000);
    if (scenario.provider === "rabbitmq") {
      leftovers = 0;
      for (const id of ids) {
        const queues = await rabbitQueues(`${id}:`);
        if (queues === undefined) {
          leftovers = undefined;
          break;
        }
        for (const q of queues) leftovers += q.messages + q.unacked;
      }
    } else if (scenario.provider === "redis") {
      leftovers = await redisLeftovers(redisPrefix);
    } else if (scenario.provider === "pulsar") {
      leftovers = await pulsarLeftovers(ids);
    }
    const logsOf = () =>
      [...retired, ...servers].map((s) => s.process.stderr() + s.process.stdout()).join("\n");
    // The executions may all complete before the dead server's lease expires (live servers finish
    // its work as soon as the broker hands it over): the lease is claimed later, at the next
    // discovery pass after it expired. Wait for that line rather than read the logs too early.
    if (killedAtMs !== undefined) {
      const deadline = killedAtMs + LEASE_MS + PROGRESS_DEADLINE_MS;
      while (!TAKEOVER.test(logsOf()) && Date.now() < deadline) await sleep(100);
    }
    const logs = logsOf();
    const result: ClusterResult = {
      name: scenario.name,
      takeovers: logs.match(new RegExp(TAKEOVER.source, "g"))?.length ?? 0,
      republished: [...logs.matchAll(/re-publishing (\d+) messages a dead server left open/g)].reduce(
        (sum, m) => sum + Number(m[1]),
        0,
      ),
      statuses,
      sink: countSink(sinkFile, scenario.executions, scenario.items),
      bound: scenario.killAt === undefined ? 0 : DUPLICATE_BOUND_PER_EXECUTION * scenario.executions,
      sseTerminal,
      killedAt,
      endedMs,
      leftovers,
      killToLastCompletionMs:
        killedAtMs === undefined || lastFinished === 0 ? undefined : lastFinished - killedAtMs,
      definitionsAgree,
      servers: servers.length,
      dir,
      diagnostics: await diagnose(),
    };
    await Promise.all(servers.map((s) => s.process.stop()));
    return result;
  } catch (error) {
    const diagnostics = await diagnose();
    for (const s of servers) {
      if (!s.process.running) continue;
      for (const id of ids)
        await api(s.base, "POST", `/api/v1/executions/${id}/cancel`).catch(() => undefined);
      break;
    }
    await Promise.all(servers.map((s) => s.process.kill9()));
    throw new Error(`[cluster] ${scenario.name} failed: ${(error as Error).message}\n${diagnostics}`);
  } finally {
    watchers.abort();
    if (scenario.provider === "redis") await dropRedisPrefix(redisPrefix);
  }
}

/** The provider settings every server of a scenario gets. */
function providerEnv(provider: ClusterScenario["provider"], redisPrefix: string): Record<string, string> {
  switch (provider) {
    case "rabbitmq":
      return { FACTFLOW_RABBITMQ_URL: RABBITMQ_URL };
    case "artemis":
      return { FACTFLOW_ARTEMIS_URL: ARTEMIS_URL };
    case "redis":
      return { FACTFLOW_REDIS_URL: REDIS_URL, FACTFLOW_REDIS_KEY_PREFIX: redisPrefix };
    case "pulsar":
      return { FACTFLOW_PULSAR_URL: PULSAR_WS_URL, FACTFLOW_PULSAR_ADMIN_URL: PULSAR_ADMIN_URL };
  }
}

/** Removes a passed scenario's directory, unless `FACTFLOW_CLUSTER_KEEP_DIR=1` (its logs are written). */
export function cleanUp(result: ClusterResult): void {
  if (process.env.FACTFLOW_CLUSTER_KEEP_DIR === "1") {
    console.log(`[cluster] kept ${result.dir}`);
    return;
  }
  rmSync(result.dir, { recursive: true, force: true });
}
