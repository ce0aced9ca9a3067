import { randomBytes } from "node:crypto";
import { type ConnectOverride, probeTcp } from "@factflow/infra-testkit";
import { Redis } from "ioredis";
import { afterAll } from "vitest";

/** The Redis the integration tests use: FACTFLOW_REDIS_URL, else the local default. */
export const REDIS_URL = process.env.FACTFLOW_REDIS_URL ?? "redis://127.0.0.1:6379";

const parsed = new URL(REDIS_URL);
export const REDIS_HOST = parsed.hostname;
export const REDIS_PORT = Number(parsed.port || 6379);

/** A key prefix of this test run only, so it deletes nothing but its own keys. */
export function testPrefix(): string {
  return `ff-test-${Date.now().toString(36)}-${randomBytes(3).toString("hex")}:`;
}

/** The Redis URL, or the same URL through the fault proxy. */
export function urlVia(override?: ConnectOverride): string {
  if (override === undefined) return REDIS_URL;
  const url = new URL(REDIS_URL);
  url.hostname = override.host;
  url.port = String(override.port);
  return url.toString();
}

/** Deletes every key starting with `prefix` (and nothing else); returns how many. */
export async function deleteKeysWithPrefix(prefix: string): Promise<number> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true });
  await redis.connect();
  let deleted = 0;
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
      cursor = next;
      const own = keys.filter((k) => k.startsWith(prefix));
      if (own.length > 0) deleted += await redis.del(...own);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
  return deleted;
}

/**
 * What an integration test file runs under: a key prefix of its own (its keys are deleted after
 * the file's tests), whether its tests are skipped (Redis unreachable, unless
 * FACTFLOW_REQUIRE_SERVICES=1 makes that a failure) and its title, saying why when Redis is not there.
 */
export async function redisTestFile(
  title: string,
): Promise<{ keyPrefix: string; skip: boolean; title: string }> {
  const available = await probeTcp(REDIS_HOST, REDIS_PORT);
  const keyPrefix = testPrefix();
  afterAll(async () => {
    if (available.ok) await deleteKeysWithPrefix(keyPrefix);
  });
  return {
    keyPrefix,
    skip: !available.ok && process.env.FACTFLOW_REQUIRE_SERVICES !== "1",
    title: available.ok ? title : `${title} (Redis not reachable: ${available.reason})`,
  };
}
