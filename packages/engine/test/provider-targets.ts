import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { createArtemisProvider } from "@factflow/infra-artemis";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { createRabbitMqProvider } from "@factflow/infra-rabbitmq";
import { probeTcp } from "@factflow/infra-testkit";
import type { QueueProtocol } from "@factflow/protocols";

/** The providers engine tests run on: embedded always, RabbitMQ and Artemis when they answer. */
export const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

function artemisUrl(): string {
  if (process.env.ARTEMIS_STOMP_URL !== undefined) return process.env.ARTEMIS_STOMP_URL;
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "artemis", "stomp.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "stomp://127.0.0.1:61613";
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
