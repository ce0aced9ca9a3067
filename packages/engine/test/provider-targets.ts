import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { createArtemisProvider } from "@factflow/infra-artemis";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { createPulsarProvider } from "@factflow/infra-pulsar";
import { createRabbitMqProvider } from "@factflow/infra-rabbitmq";
import { createRedisProvider } from "@factflow/infra-redis";
import { probeTcp } from "@factflow/infra-testkit";
import type { QueueProtocol } from "@factflow/protocols";

/** The providers engine tests run on: embedded always, RabbitMQ and Artemis when they answer. */
export const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const REDIS_URL = process.env.FACTFLOW_REDIS_URL ?? "redis://127.0.0.1:6379";

/**
 * A Redis provider under a key prefix of its own (never the default `factflow:`), whose close also
 * deletes every destination it left behind, through a second provider on the same prefix.
 */
function redisTarget(): QueueProtocol {
  const keyPrefix = `ff-test-engine-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}:`;
  const provider = createRedisProvider({ url: REDIS_URL, keyPrefix });
  const close = provider.close.bind(provider);
  return Object.assign(provider, {
    close: async () => {
      await close();
      const janitor = createRedisProvider({ url: REDIS_URL, keyPrefix });
      await janitor.connect();
      try {
        for (const d of await janitor.admin.listDestinations()) {
          const sources =
            d.kind === "queue"
              ? [{ destination: d.destination }]
              : (d.subscriptions ?? []).map((subscription) => ({ destination: d.destination, subscription }));
          for (const source of sources)
            await janitor.admin.deleteDestination(source, { keepDeadLetters: false });
        }
      } finally {
        await janitor.close();
      }
    },
  });
}

/**
 * A Pulsar provider whose close also deletes every topic it used (execution-scoped queues, their
 * retry and dead-letter topics), through a second provider. The destinations are read before the
 * close, and deleted only after it: the close ends every consumer first, so no consumer reconnects
 * and brings a force-deleted topic back.
 */
function pulsarTarget(): QueueProtocol {
  const provider = createPulsarProvider({ url: pulsarUrl() });
  const close = provider.close.bind(provider);
  let closed = false;
  return Object.assign(provider, {
    close: async () => {
      if (closed) return close();
      closed = true;
      const used = await provider.admin.listDestinations().catch(() => []);
      await close();
      if (used.length === 0) return;
      const janitor = createPulsarProvider({ url: pulsarUrl() });
      await janitor.connect();
      try {
        for (const d of used) await janitor.destroy(d.destination).catch(() => undefined);
      } finally {
        await janitor.close();
      }
    },
  });
}

function artemisUrl(): string {
  if (process.env.ARTEMIS_STOMP_URL !== undefined) return process.env.ARTEMIS_STOMP_URL;
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "stomp://127.0.0.1:61613";
}

function pulsarUrl(): string {
  if (process.env.PULSAR_URL !== undefined) return process.env.PULSAR_URL;
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "pulsar", "ws.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "ws://127.0.0.1:8080";
}

export interface Target {
  readonly name: string;
  readonly url?: string;
  readonly create: () => QueueProtocol;
}

export const TARGETS: Target[] = [
  { name: "embedded", create: () => createEmbeddedProvider({ mode: "memory" }) },
  { name: "rabbitmq", url: RABBITMQ_URL, create: () => createRabbitMqProvider({ url: RABBITMQ_URL }) },
  { name: "artemis", url: artemisUrl(), create: () => createArtemisProvider({ url: artemisUrl() }) },
  { name: "pulsar", url: pulsarUrl(), create: pulsarTarget },
  {
    name: "redis",
    url: REDIS_URL,
    create: redisTarget,
  },
];

/** Why each broker target is unreachable (undefined when it answers). */
export const reachable = new Map<string, string | undefined>();
for (const target of TARGETS) {
  if (target.url === undefined) continue;
  const url = new URL(target.url);
  const probe = await probeTcp(url.hostname, Number(url.port), 1000);
  reachable.set(target.name, probe.ok ? undefined : probe.reason);
  if (!probe.ok)
    console.warn(
      `[factflow/engine] never-settles on ${target.name} ${required ? "FAILS" : "skipped"}: ${target.url} unreachable (${probe.reason})`,
    );
}
