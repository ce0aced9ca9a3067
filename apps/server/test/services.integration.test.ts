import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { connectPostgres } from "@factflow/lineage";
import { silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { call, EXAMPLE_DIR, readSse, SAMPLE_DOCS, sectionsInArtefacts } from "./helpers.js";
import { ARTEMIS_URL, DATABASE_URL, RABBITMQ_URL, unreachable } from "./services.js";

/** What `scripts/services/pulsar.sh` recorded for its broker (`ws.url`, `web.url`), if anything. */
function recordedPulsar(file: "ws.url" | "web.url"): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const path = join(base, "pulsar", file);
  return existsSync(path) ? readFileSync(path, "utf8").trim() || undefined : undefined;
}

// Resolved like the Pulsar package's own tests (packages/infra/pulsar/test/helpers.ts).
const PULSAR_URL = process.env.PULSAR_URL ?? recordedPulsar("ws.url") ?? "ws://127.0.0.1:8080";
const PULSAR_ADMIN_URL = process.env.PULSAR_ADMIN_URL ?? recordedPulsar("web.url");
const REDIS_URL = process.env.FACTFLOW_REDIS_URL ?? "redis://127.0.0.1:6379";

// The server composed on the machine's real services: PostgreSQL with each broker in turn.
const CASES = [
  {
    provider: "rabbitmq",
    skip: (await unreachable("the rabbitmq integration tests", [DATABASE_URL, RABBITMQ_URL])) !== undefined,
    settings: { provider: "rabbitmq", rabbitmq_url: RABBITMQ_URL },
    counter: /factflow_provider_messages_total\{event="confirmed",provider="rabbitmq"\} [1-9]/,
  },
  {
    provider: "artemis",
    skip:
      (await unreachable("the artemis integration tests", [
        DATABASE_URL,
        ARTEMIS_URL.replace(/^stomp:/, "tcp:"),
      ])) !== undefined,
    settings: {
      provider: "artemis",
      artemis_url: ARTEMIS_URL,
      artemis_user: process.env.ARTEMIS_USER ?? "factflow",
      artemis_password: process.env.ARTEMIS_PASSWORD ?? "factflow",
    },
    counter: /factflow_provider_messages_total\{event="confirmed",provider="artemis"\} [1-9]/,
  },
  {
    provider: "pulsar",
    skip:
      (await unreachable("the pulsar integration tests", [
        DATABASE_URL,
        PULSAR_URL.replace(/^ws/, "http"),
      ])) !== undefined,
    settings: {
      provider: "pulsar",
      pulsar_url: PULSAR_URL,
      ...(PULSAR_ADMIN_URL === undefined ? {} : { pulsar_admin_url: PULSAR_ADMIN_URL }),
    },
    counter: /factflow_provider_messages_total\{event="confirmed",provider="pulsar"\} [1-9]/,
  },
  {
    provider: "redis",
    skip: (await unreachable("the redis integration tests", [DATABASE_URL, REDIS_URL])) !== undefined,
    settings: { provider: "redis", redis_url: REDIS_URL },
    counter: /factflow_provider_messages_total\{event="confirmed",provider="redis"\} [1-9]/,
  },
] as const;

/**
 * Deletes what the executions left on a shared broker (their queues hold a redriven message): on
 * Redis the destinations naming an execution, on Pulsar the topics naming one. RabbitMQ and Artemis
 * cases leave the broker to the engine's own cleanup, as before.
 */
async function removeExecutionDestinations(provider: string, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const mine = (name: string) => ids.some((id) => name.includes(id));
  if (provider === "redis") {
    const { createRedisProvider } = await import("@factflow/infra-redis");
    const janitor = createRedisProvider({ url: REDIS_URL });
    await janitor.connect();
    try {
      for (const d of await janitor.admin.listDestinations()) {
        if (!mine(d.destination)) continue;
        const sources =
          d.kind === "queue"
            ? [{ destination: d.destination }]
            : (d.subscriptions ?? []).map((subscription) => ({ destination: d.destination, subscription }));
        for (const source of sources)
          await janitor.admin.deleteDestination(source, { keepDeadLetters: false }).catch(() => undefined);
      }
    } finally {
      await janitor.close();
    }
  } else if (provider === "pulsar") {
    const base = `${PULSAR_ADMIN_URL ?? PULSAR_URL.replace(/^ws/, "http")}/admin/v2/persistent/public/default`;
    const topics = (await (await fetch(base)).json()) as string[];
    for (const topic of topics.filter(mine)) {
      const local = topic.slice(topic.lastIndexOf("/") + 1);
      await fetch(`${base}/${encodeURIComponent(local)}?force=true`, { method: "DELETE" }).catch(
        () => undefined,
      );
    }
  }
}

async function admin(statement: string): Promise<void> {
  const handles = await connectPostgres(DATABASE_URL, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
  try {
    await handles.writer.execute(statement, []);
  } finally {
    await handles.close();
  }
}

describe.each(CASES)(
  "server on $provider + PostgreSQL",
  ({ provider, skip, settings: providerSettings, counter }) => {
    // Unreachable services were reported (or failed under FACTFLOW_REQUIRE_SERVICES=1) by the probe.
    describe.skipIf(skip)("with its services reachable", () => {
      let server: RunningServer;
      let dir: string;
      const executions: string[] = [];
      const databaseName = `factflow_server_${provider}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;

      beforeAll(async () => {
        dir = mkdtempSync(join(tmpdir(), "factflow-services-"));
        await admin(`create database "${databaseName}"`);
        const url = new URL(DATABASE_URL);
        url.pathname = `/${databaseName}`;
        const settings = loadSettings({
          env: {},
          cwd: dir,
          overrides: {
            ...providerSettings,
            database_url: url.toString(),
            data_dir: join(dir, "data"),
            config_dir: EXAMPLE_DIR,
            port: 0,
          },
        });
        server = await startServer(settings, { logger: silentLogger, progressIntervalMs: 100 });
      }, 180_000);

      afterAll(async () => {
        await server?.close();
        await removeExecutionDestinations(provider, executions).catch((error: unknown) =>
          console.warn(
            `[server] could not remove the ${provider} destinations of the test: ${String(error)}`,
          ),
        );
        await admin(`drop database if exists "${databaseName}" with (force)`).catch(() => undefined);
        if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
      });

      it("runs the example to completion with retries and a dead letter, then redrives it", async () => {
        const created = await call(server.url, "POST", "/api/v1/executions", {
          config: "docs-ingest",
          input: { roots: [SAMPLE_DOCS] },
        });
        expect(created.status).toBe(201);
        const id = created.body.id as string;
        executions.push(id);
        const events = await readSse(`${server.url}/api/v1/executions/${id}/events`);
        expect(events.at(-1)?.event).toBe("completed");
        const one = await call(server.url, "GET", `/api/v1/executions/${id}`);
        expect(one.body.routes.batch.messages.completed).toBe(12);
        // Batches close at 8 sections or on a timed flush, so their number depends on timing.
        expect(await sectionsInArtefacts(server, id)).toBe(12);

        const q = new URLSearchParams({ destination: `/queue/${id}/docs.sections` }).toString();
        const dlq = await call(server.url, "GET", `/api/v1/queues/dlq?${q}`);
        expect(dlq.body.total).toBe(1);
        // The execution is over: a plain redrive is refused (nobody consumes its queues any more).
        const refused = await call(server.url, "POST", "/api/v1/queues/dlq/redrive", {
          destination: `/queue/${id}/docs.sections`,
        });
        expect(refused.status).toBe(409);
        expect(refused.body.error.code).toBe("execution_not_running");
        const redrive = await call(server.url, "POST", "/api/v1/queues/dlq/redrive", {
          destination: `/queue/${id}/docs.sections`,
          force: true,
        });
        expect(
          redrive.body.redriven,
          `redrive answered ${redrive.status} ${JSON.stringify(redrive.body)}`,
        ).toBe(1);

        const counters = await call(server.url, "GET", "/api/v1/queues/counters");
        expect(counters.status).toBe(200);
        expect(counters.body.provider).toBe(provider);
        expect(counters.body.durability.confirmed).toBeGreaterThan(0);
        expect(counters.body.durability.lost).toBe(0);
        expect(counters.body.lineage.lost).toBe(0);

        const metrics = (await call(server.url, "GET", "/metrics")).text;
        expect(metrics).toMatch(counter);
      }, 180_000);

      it("passes the MQ diagnostic on every route", async () => {
        const result = await call(server.url, "POST", "/api/v1/system/mq-diagnostic");
        expect(result.body.lines).toHaveLength(5);
        expect(result.body.ok).toBe(true);
      }, 180_000);
    });
  },
);
