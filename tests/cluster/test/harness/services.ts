import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export {
  checkServices,
  createDatabase,
  DATABASE_URL,
  RABBITMQ_URL,
  rabbitQueues,
} from "../../../crash/test/harness/services.js";

/** What a service script under `scripts/services` recorded (`<service>/<file>`), if anything. */
function recorded(service: string, file: string): string | undefined {
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const path = join(base, service, file);
  return existsSync(path) ? readFileSync(path, "utf8").trim() || undefined : undefined;
}

/** The Artemis STOMP URL: `ARTEMIS_STOMP_URL`, else what the service script recorded. */
export const ARTEMIS_URL =
  process.env.ARTEMIS_STOMP_URL ?? recorded("artemis", "stomp.url") ?? "stomp://127.0.0.1:61613";
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
/** Pulsar's WebSocket API and admin REST (`scripts/services/pulsar.sh start` records both). */
export const PULSAR_WS_URL =
  process.env.PULSAR_WS_URL ?? recorded("pulsar", "ws.url") ?? "ws://127.0.0.1:8080";
export const PULSAR_ADMIN_URL =
  process.env.PULSAR_ADMIN_URL ?? recorded("pulsar", "web.url") ?? PULSAR_WS_URL.replace(/^ws/, "http");

function redisCli(args: readonly string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile("redis-cli", ["-u", REDIS_URL, ...args], { timeout: 30_000 }, (error, stdout) =>
      resolve(error === null ? stdout : undefined),
    );
  });
}

/**
 * Entries left under a Redis key prefix, asked of Redis itself with `redis-cli`: every stream's
 * length (settled entries are deleted) and every delayed set's size. Undefined without `redis-cli`.
 */
export async function redisLeftovers(prefix: string): Promise<number | undefined> {
  const keys = await redisCli(["--scan", "--pattern", `${prefix}*`]);
  if (keys === undefined) return undefined;
  let left = 0;
  for (const key of keys.split("\n").filter((k) => k !== "")) {
    const type = (await redisCli(["type", key]))?.trim();
    if (type === "stream") left += Number(await redisCli(["xlen", key]));
    else if (key.endsWith(":delayed")) left += Number(await redisCli(["zcard", key]));
  }
  return left;
}

/** Deletes every key under a Redis key prefix (a scenario's own). */
export async function dropRedisPrefix(prefix: string): Promise<void> {
  const keys = await redisCli(["--scan", "--pattern", `${prefix}*`]);
  for (const key of keys?.split("\n").filter((k) => k !== "") ?? []) await redisCli(["del", key]);
}

/**
 * Messages left on Pulsar topics whose names hold one of `ids`: the backlog of every subscription,
 * from the admin REST stats. Undefined when the admin API does not answer.
 */
export async function pulsarLeftovers(ids: readonly string[]): Promise<number | undefined> {
  const base = `${PULSAR_ADMIN_URL}/admin/v2/persistent/public/default`;
  try {
    const response = await fetch(base, { signal: AbortSignal.timeout(30_000) });
    if (!response.ok) return undefined;
    const topics = ((await response.json()) as string[]).map((t) => t.split("/").pop() ?? "");
    let left = 0;
    for (const topic of topics.filter((t) => ids.some((id) => t.includes(id)))) {
      const stats = await fetch(`${base}/${topic}/stats`, { signal: AbortSignal.timeout(30_000) });
      if (!stats.ok) continue;
      const body = (await stats.json()) as { subscriptions?: Record<string, { msgBacklog?: number }> };
      for (const sub of Object.values(body.subscriptions ?? {})) left += sub.msgBacklog ?? 0;
    }
    return left;
  } catch {
    return undefined;
  }
}
