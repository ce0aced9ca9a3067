import { collectDeliveries, waitFor } from "@factflow/infra-testkit";
import { describe, expect, it } from "vitest";
import { createRedisProvider, type RedisProvider } from "../src/index.js";
import { expectTakenOver, killDoomed, publishToDoomed, startDoomedConsumer } from "./doomed-consumer.js";
import { REDIS_URL, redisTestFile } from "./helpers.js";

const file = await redisTestFile("a consumer killed with SIGKILL");
const { keyPrefix } = file;
const VISIBILITY_MS = 1_500;
const MESSAGES = 5;

describe.skipIf(file.skip)(file.title, () => {
  it("leaves pending entries that another consumer reclaims after the visibility timeout", async () => {
    const queue = "/queue/kill/work";
    const doomed = startDoomedConsumer({
      keyPrefix,
      queue,
      visibilityTimeoutMs: VISIBILITY_MS,
      prefetch: 10,
    });
    const provider: RedisProvider = createRedisProvider({
      url: REDIS_URL,
      keyPrefix,
      visibilityTimeoutMs: VISIBILITY_MS,
    });
    await provider.connect();
    try {
      const ids = await publishToDoomed(provider, doomed, queue, MESSAGES);
      const held = await provider.admin.stats({ destination: queue });
      expect(held).toMatchObject({ depth: 0, inFlight: MESSAGES, consumers: 1 });

      await killDoomed(doomed);

      const survivor = collectDeliveries();
      await provider.subscribe(queue, survivor.handler, { subscription: "survivor", prefetch: 10 });
      await expectTakenOver(provider, survivor, ids);
      // The dead consumer stops counting once its heartbeat is stale, and is removed from the group.
      await waitFor(
        async () => {
          const s = await provider.admin.stats({ destination: queue });
          return s.depth === 0 && s.inFlight === 0 && s.consumers === 1 && s.dlqDepth === 0;
        },
        { timeoutMs: 30_000, description: "an empty queue with one live consumer" },
      );
    } finally {
      doomed.child.proc.kill("SIGKILL");
      await provider.close();
    }
  }, 120_000);
});
