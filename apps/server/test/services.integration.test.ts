import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { connectPostgres } from "@factflow/lineage";
import { silentLogger } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { loadSettings } from "../src/settings.js";
import { call, EXAMPLE_DIR, readSse, SAMPLE_DOCS, sectionsInArtefacts } from "./helpers.js";

// The server composed on the machine's real services: PostgreSQL with RabbitMQ, then with Artemis.
const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** The URL `scripts/services/artemis.sh` recorded for the broker it started, if any. */
function recordedArtemisUrl(): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() || undefined : undefined;
}

// Resolved like the Artemis package's own tests (packages/infra/artemis/test/helpers.ts).
const ARTEMIS_URL = process.env.ARTEMIS_STOMP_URL ?? recordedArtemisUrl() ?? "stomp://127.0.0.1:61613";
const REQUIRE = process.env.FACTFLOW_REQUIRE_SERVICES === "1";

function probeTcp(url: string): Promise<string | undefined> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port), timeout: 2000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.once("timeout", () => {
      socket.destroy();
      resolve(`${hostname}:${port} timed out`);
    });
    socket.once("error", (error) => resolve(`${hostname}:${port} ${error.message}`));
  });
}

/** Why the services of one provider cannot be reached (after a warning), or undefined. */
async function unreachable(provider: string, urls: string[]): Promise<string | undefined> {
  const problems = (await Promise.all(urls.map(probeTcp))).filter((p) => p !== undefined);
  if (problems.length === 0) return undefined;
  const reason = problems.join("; ");
  if (REQUIRE)
    throw new Error(
      `[server] ${provider} integration needs its services (FACTFLOW_REQUIRE_SERVICES=1): ${reason}`,
    );
  console.warn(`[server] skipping the ${provider} integration tests: ${reason}`);
  return reason;
}

const CASES = [
  {
    provider: "rabbitmq",
    skip: (await unreachable("rabbitmq", [DATABASE_URL, RABBITMQ_URL])) !== undefined,
    settings: { provider: "rabbitmq", rabbitmq_url: RABBITMQ_URL },
    counter: /factflow_provider_messages_total\{event="confirmed",provider="rabbitmq"\} [1-9]/,
  },
  {
    provider: "artemis",
    skip:
      (await unreachable("artemis", [DATABASE_URL, ARTEMIS_URL.replace(/^stomp:/, "tcp:")])) !== undefined,
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
    let server: RunningServer;
    let dir: string;
    const databaseName = `factflow_server_${provider}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
    if (skip) {
      it.skip(`needs PostgreSQL and ${provider} (see the warning above)`, () => {});
      return;
    }

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
  },
);
