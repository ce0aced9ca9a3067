import { collectDeliveries, waitFor } from "@factflow/infra-testkit";
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { createRedisProvider, laneFor, type RedisProvider } from "../src/index.js";
import { expectTakenOver, killDoomed, publishToDoomed, startDoomedConsumer } from "./doomed-consumer.js";
import { REDIS_URL, redisTestFile } from "./helpers.js";

// A cluster server taking over a dead one calls `claimFromNode`: the dead node's pending entries
// move at once, not after the visibility timeout (an hour here, so nothing else can move them).

const file = await redisTestFile("claimFromNode after a consumer was killed with SIGKILL");
const { keyPrefix } = file;
const HOUR_MS = 3_600_000;
const MESSAGES = 10;
const DEAD_NODE = "dead-node";

/** The consumer names of a queue's group, read from Redis. */
async function groupConsumers(queue: string): Promise<string[]> {
  const redis = new Redis(REDIS_URL);
  try {
    const list = (await redis.xinfo(
      "CONSUMERS",
      laneFor(keyPrefix, queue).stream,
      "factflow",
    )) as unknown[][];
    return list.map((fields) => String(fields[fields.indexOf("name") + 1]));
  } finally {
    redis.disconnect();
  }
}

describe.skipIf(file.skip)(file.title, () => {
  it("hands the dead node's pending entries to a live consumer at once, beyond one prefetch", async () => {
    const queue = "/queue/claim/work";
    const doomed = startDoomedConsumer({
      keyPrefix,
      queue,
      visibilityTimeoutMs: HOUR_MS,
      prefetch: MESSAGES,
      node: DEAD_NODE,
    });
    // Small prefetch: the survivor cannot take all of them in one claim; its reclaim passes
    // (every 200 ms) take the rest while the dead node stays marked.
    const provider: RedisProvider = createRedisProvider(
      { url: REDIS_URL, keyPrefix, visibilityTimeoutMs: HOUR_MS, reclaimIntervalMs: 200 },
      { node: "live-node" },
    );
    await provider.connect();
    try {
      const ids = await publishToDoomed(provider, doomed, queue, MESSAGES);
      await killDoomed(doomed);

      const survivor = collectDeliveries();
      await provider.subscribe(queue, survivor.handler, { subscription: "survivor", prefetch: 4 });
      // A live node's own consumers are never claimed, and an unknown node claims nothing.
      await provider.claimFromNode("live-node");
      await provider.claimFromNode("some-other-node");
      expect(survivor.deliveries).toEqual([]);

      await provider.claimFromNode(DEAD_NODE);
      await expectTakenOver(provider, survivor, ids);
      // Emptied, the dead node's consumer is removed from the group; the live one stays.
      let names: string[] = [];
      await waitFor(
        async () => {
          names = await groupConsumers(queue);
          return names.every((name) => name.startsWith("live-node/"));
        },
        { timeoutMs: 30_000, description: () => `only live-node consumers in the group (${names})` },
      );
    } finally {
      doomed.child.proc.kill("SIGKILL");
      await provider.close();
    }
  }, 120_000);
});
