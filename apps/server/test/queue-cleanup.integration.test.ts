import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { deadLetterQueueName, resolveDestination } from "@factflow/infra-rabbitmq";
import { silentLogger } from "@factflow/protocols";
import { loadSettings, scopedDestinations } from "@factflow/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { call, EXAMPLE_DIR, readSse, SAMPLE_DOCS, waitFor } from "./helpers.js";
import { RABBITMQ_URL, unreachable } from "./services.js";

// The janitor on a real RabbitMQ: after an execution ends, its scoped queues are gone from the
// broker while the dead-letter queue holding the example's one dead letter stays.

/** The slice of amqplib this test uses (passive declares and a final delete). */
interface AmqpChannel {
  checkQueue(name: string): Promise<{ messageCount: number }>;
  deleteQueue(name: string): Promise<unknown>;
  close(): Promise<void>;
  on(event: "error", listener: (error: Error) => void): void;
}
interface AmqpConnection {
  createChannel(): Promise<AmqpChannel>;
  close(): Promise<void>;
}

// amqplib is the RabbitMQ provider's client; borrow it from there instead of adding a dependency.
const amqplib = createRequire(import.meta.resolve("@factflow/infra-rabbitmq"))("amqplib") as {
  connect(url: string): Promise<AmqpConnection>;
};

const rabbitDown = await unreachable("the RabbitMQ queue cleanup test", [RABBITMQ_URL]);

/** Message count of a queue, or undefined when it does not exist (a 404 closes the channel, so one each). */
async function inspect(connection: AmqpConnection, queue: string): Promise<number | undefined> {
  const channel = await connection.createChannel();
  channel.on("error", () => {});
  try {
    return (await channel.checkQueue(queue)).messageCount;
  } catch (error) {
    if (/NOT_FOUND|404/.test(String(error))) return undefined;
    throw error;
  } finally {
    await channel.close().catch(() => undefined);
  }
}

const amqpQueue = (destination: string): string => {
  const target = resolveDestination(destination);
  if (target.kind !== "queue") throw new Error(`${destination} is not a queue`);
  return target.queue;
};

describe.skipIf(rabbitDown !== undefined)("queue cleanup on RabbitMQ", () => {
  let server: RunningServer;
  let dir: string;
  let connection: AmqpConnection;
  const leftovers: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "factflow-cleanup-"));
    const settings = loadSettings({
      env: {},
      cwd: dir,
      overrides: {
        provider: "rabbitmq",
        rabbitmq_url: RABBITMQ_URL,
        data_dir: join(dir, "data"),
        config_dir: EXAMPLE_DIR,
        port: 0,
      },
    });
    server = await startServer(settings, { logger: silentLogger, progressIntervalMs: 100 });
    connection = await amqplib.connect(RABBITMQ_URL);
  }, 180_000);

  afterAll(async () => {
    if (connection !== undefined) {
      const channel = await connection.createChannel();
      channel.on("error", () => {});
      for (const name of leftovers) await channel.deleteQueue(name).catch(() => undefined);
      await channel.close().catch(() => undefined);
      await connection.close().catch(() => undefined);
    }
    await server?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it("deletes an ended execution's scoped queues and keeps its non-empty dead-letter queue", async () => {
    const created = await call(server.url, "POST", "/api/v1/executions", {
      config: "docs-ingest",
      input: { roots: [SAMPLE_DOCS] },
    });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const events = await readSse(`${server.url}/api/v1/executions/${id}/events`);
    expect(events.at(-1)?.event).toBe("completed");

    const config = (await server.runtime.configs.resolve("docs-ingest")).config;
    const queues = scopedDestinations(server.runtime.provider, id, config).map(amqpQueue);
    expect(queues).toHaveLength(5);
    const dlq = deadLetterQueueName(amqpQueue(`/queue/${id}/docs.sections`), "queue");
    leftovers.push(dlq, ...queues);

    await waitFor(
      async () => {
        for (const queue of queues) if ((await inspect(connection, queue)) !== undefined) return undefined;
        return true;
      },
      20_000,
      `the scoped queues of ${id} to be deleted`,
    );
    expect(await inspect(connection, dlq), "the dead-letter queue with its one dead letter stays").toBe(1);
    // The retry holding queues the example's transient failures used are gone too.
    for (const delay of [1000, 2000, 4000]) {
      expect(await inspect(connection, `${amqpQueue(`/queue/${id}/docs.sections`)}:retry.${delay}`)).toBe(
        undefined,
      );
    }
    const dead = await call(
      server.url,
      "GET",
      `/api/v1/queues/dlq?${new URLSearchParams({ destination: `/queue/${id}/docs.sections` })}`,
    );
    expect(dead.body.total, "still browsable through the admin API").toBe(1);
    const metrics = (await call(server.url, "GET", "/metrics")).text;
    expect(metrics).toMatch(/factflow_queue_cleanup_total\{outcome="kept_dead_letters"\} 1/);
    expect(metrics).toMatch(/factflow_queue_cleanup_total\{outcome="deleted"\} 4/);

    // An operator drops the dead letters over HTTP once they are dealt with.
    const source = { destination: `/queue/${id}/docs.sections` };
    const kept = await call(server.url, "POST", "/api/v1/queues/delete", { ...source, if_empty: true });
    expect(kept.body, "the source is gone; its dead letters are still kept").toMatchObject({
      deleted: false,
    });
    const dropped = await call(server.url, "POST", "/api/v1/queues/delete", {
      ...source,
      keep_dead_letters: false,
    });
    expect(dropped.status).toBe(200);
    expect(dropped.body).toMatchObject({ deleted: true, dead_letters_kept: 0 });
    expect(await inspect(connection, dlq), "the dead-letter queue is gone").toBe(undefined);
  }, 180_000);

  it("the MQ diagnostic deletes its scratch queues", async () => {
    const result = await call(server.url, "POST", "/api/v1/system/mq-diagnostic");
    expect(result.body.ok).toBe(true);
    const destinations = (result.body.results as { destination: string }[]).map((r) => r.destination);
    expect(destinations.length).toBeGreaterThan(0);
    leftovers.push(...destinations.map(amqpQueue));
    for (const destination of destinations) {
      expect(await inspect(connection, amqpQueue(destination)), `${destination} deleted`).toBe(undefined);
    }
  }, 180_000);
});
