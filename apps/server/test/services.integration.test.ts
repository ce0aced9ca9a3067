import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectPostgres } from "@factflow/lineage";
import { silentLogger } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { loadSettings } from "../src/settings.js";
import { call, EXAMPLE_DIR, readSse, SAMPLE_DOCS, sectionsInArtefacts } from "./helpers.js";
import { ARTEMIS_URL, DATABASE_URL, RABBITMQ_URL, unreachable } from "./services.js";

// The server composed on the machine's real services: PostgreSQL with RabbitMQ, then with Artemis.
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
] as const;

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
      }, 60_000);

      afterAll(async () => {
        await server?.close();
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
        expect(redrive.body.redriven).toBe(1);

        const counters = await call(server.url, "GET", "/api/v1/queues/counters");
        expect(counters.status).toBe(200);
        expect(counters.body.provider).toBe(provider);
        expect(counters.body.durability.confirmed).toBeGreaterThan(0);
        expect(counters.body.durability.lost).toBe(0);
        expect(counters.body.lineage.lost).toBe(0);

        const metrics = (await call(server.url, "GET", "/metrics")).text;
        expect(metrics).toMatch(counter);
      }, 60_000);

      it("passes the MQ diagnostic on every route", async () => {
        const result = await call(server.url, "POST", "/api/v1/system/mq-diagnostic");
        expect(result.body.lines).toHaveLength(5);
        expect(result.body.ok).toBe(true);
      }, 60_000);
    });
  },
);
