import { execFile } from "node:child_process";
import { connect } from "node:net";
import { connectPostgres } from "@factflow/lineage";

// The machine's real services; each URL can be overridden by env, as in the other integration tests.
export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const REQUIRE_SERVICES = process.env.FACTFLOW_REQUIRE_SERVICES === "1";

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

/** Whether a group of scenarios can use its services. */
export interface ServiceCheck {
  /** Skip the group (services missing, and not required). */
  readonly skip: boolean;
  /** Why the services cannot be used; when not skipped, the group fails with it. */
  readonly problem?: string;
}

/**
 * Probes the services at `urls`. Missing ones skip the group with a printed reason, except under
 * FACTFLOW_REQUIRE_SERVICES=1 (CI), where the group runs and fails with the reason: a missing
 * service is a failure there, never a skip.
 */
export async function checkServices(what: string, urls: readonly string[]): Promise<ServiceCheck> {
  const problems = (await Promise.all(urls.map(probeTcp))).filter((p) => p !== undefined);
  if (problems.length === 0) return { skip: false };
  const problem = `${what} cannot run, a service does not answer: ${problems.join("; ")}`;
  if (REQUIRE_SERVICES) return { skip: false, problem: `${problem} (FACTFLOW_REQUIRE_SERVICES=1)` };
  console.warn(`[crash] skipping ${what}: ${problems.join("; ")}`);
  return { skip: true, problem };
}

async function admin(statement: string): Promise<void> {
  const handles = await connectPostgres(DATABASE_URL, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
  try {
    await handles.writer.execute(statement, []);
  } finally {
    await handles.close();
  }
}

/** A database of its own for one run of the suite; `drop()` removes it (and its connections). */
export async function createDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `factflow_crash_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await admin(`create database "${name}"`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`drop database if exists "${name}" with (force)`) };
}

/** One queue as the broker itself reports it (not through Factflow). */
export interface BrokerQueue {
  readonly name: string;
  readonly messages: number;
  readonly unacked: number;
  readonly consumers: number;
}

/**
 * Every RabbitMQ queue whose name starts with `prefix`, asked of the broker with `rabbitmqctl`
 * (which sees retry and dead-letter queues too). Undefined when `rabbitmqctl` cannot be run here.
 */
export function rabbitQueues(prefix: string): Promise<BrokerQueue[] | undefined> {
  return new Promise((resolve) => {
    execFile(
      "rabbitmqctl",
      ["list_queues", "-q", "--no-table-headers", "name", "messages", "messages_unacknowledged", "consumers"],
      { timeout: 60_000 },
      (error, stdout) => {
        if (error !== null) {
          resolve(undefined);
          return;
        }
        const queues: BrokerQueue[] = [];
        for (const line of stdout.split("\n")) {
          const [name, messages, unacked, consumers] = line.trim().split(/\s+/);
          if (name === undefined || !name.startsWith(prefix)) continue;
          queues.push({
            name,
            messages: Number(messages),
            unacked: Number(unacked),
            consumers: Number(consumers),
          });
        }
        resolve(queues);
      },
    );
  });
}
