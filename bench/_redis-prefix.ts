import { Redis } from "ioredis";

/** Deletes every key under `prefix` (and nothing else): a bench round's own keys. */
export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url);
  try {
    let cursor = "0";
    do {
      const [next, keys] = await redis.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1_000);
      cursor = next;
      const own = keys.filter((k) => k.startsWith(prefix));
      if (own.length > 0) await redis.del(...own);
    } while (cursor !== "0");
  } finally {
    redis.disconnect();
  }
}
