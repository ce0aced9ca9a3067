import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { createArtemisProvider } from "@factflow/infra-artemis";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { createPulsarProvider } from "@factflow/infra-pulsar";
import { createRabbitMqProvider } from "@factflow/infra-rabbitmq";
import { createRedisProvider } from "@factflow/infra-redis";
import { probeTcp } from "@factflow/infra-testkit";
import type { QueueProtocol } from "@factflow/protocols";
import { RABBITMQ_URL } from "./databases.js";
import type { ShapeLimits } from "./generator.js";

const servicesDir = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
const recorded = (service: string, file: string, fallback: string): string => {
  const path = join(servicesDir, service, file);
  return existsSync(path) ? readFileSync(path, "utf8").trim() : fallback;
};

const REDIS_URL = process.env.FACTFLOW_REDIS_URL ?? "redis://127.0.0.1:6379";
const ARTEMIS_URL =
  process.env.ARTEMIS_STOMP_URL ?? recorded("artemis", "stomp.url", "stomp://127.0.0.1:61613");
const PULSAR_URL = process.env.PULSAR_URL ?? recorded("pulsar", "ws.url", "ws://127.0.0.1:8080");

/** A provider the model suite runs on, and how many cases it gets in a default run. */
export interface ModelTarget {
  readonly name: string;
  /** The service URL to probe first (none for the embedded provider). */
  readonly url?: string;
  /** Cases per default run: the CI budget. */
  readonly runs: number;
  readonly limits: Omit<ShapeLimits, "maxArrivals">;
  /** Messages a case may move: brokers that pay a round trip per message get smaller shapes. */
  readonly maxArrivals: number;
  create(): { queue: QueueProtocol; cleanup(): void };
}

const all = { priorities: true, fifo: true, orderedGroups: true };
const unique = () => `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export const MODEL_TARGETS: readonly ModelTarget[] = [
  {
    name: "embedded-memory",
    runs: 200,
    limits: all,
    maxArrivals: 400,
    create: () => ({ queue: createEmbeddedProvider({ mode: "memory" }), cleanup() {} }),
  },
  {
    name: "embedded-file",
    runs: 120,
    limits: all,
    maxArrivals: 400,
    create() {
      const dir = mkdtempSync(join(tmpdir(), "factflow-model-"));
      return {
        queue: createEmbeddedProvider({ mode: "file", dataDir: dir }),
        cleanup: () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    // The file mode with no memory budget: every waiting message is paged out to the log and read
    // back when delivered.
    name: "embedded-file-paged",
    runs: 40,
    limits: all,
    maxArrivals: 400,
    create() {
      const dir = mkdtempSync(join(tmpdir(), "factflow-model-"));
      return {
        queue: createEmbeddedProvider({ mode: "file", dataDir: dir, memoryBudgetBytes: 0 }),
        cleanup: () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  },
  {
    name: "rabbitmq",
    url: RABBITMQ_URL,
    runs: 40,
    limits: all,
    maxArrivals: 150,
    create: () => ({ queue: createRabbitMqProvider({ url: RABBITMQ_URL }), cleanup() {} }),
  },
  {
    name: "artemis",
    url: ARTEMIS_URL,
    runs: 40,
    limits: all,
    maxArrivals: 150,
    create: () => ({ queue: createArtemisProvider({ url: ARTEMIS_URL }), cleanup() {} }),
  },
  {
    name: "redis",
    url: REDIS_URL,
    runs: 60,
    limits: { priorities: false, fifo: false, orderedGroups: false },
    maxArrivals: 150,
    create: () => ({
      queue: createRedisProvider({ url: REDIS_URL, keyPrefix: `ff-model-${unique()}:` }),
      cleanup() {},
    }),
  },
  {
    name: "pulsar",
    url: PULSAR_URL,
    runs: 20,
    limits: { priorities: false, fifo: true, orderedGroups: true },
    maxArrivals: 100,
    create: () => ({ queue: createPulsarProvider({ url: PULSAR_URL }), cleanup() {} }),
  },
];

/** Why a target's service cannot be reached, or undefined when it answers. */
export async function unreachable(target: ModelTarget): Promise<string | undefined> {
  if (target.url === undefined) return undefined;
  const url = new URL(target.url);
  const probe = await probeTcp(url.hostname, Number(url.port), 1000);
  return probe.ok ? undefined : `${target.url} unreachable (${probe.reason})`;
}
