import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { GROUP } from "../src/naming.js";
import { runScript, SETTLE_ACKS } from "../src/scripts.js";
import { REDIS_URL, redisTestFile } from "./helpers.js";

const { keyPrefix, skip, title } = await redisTestFile("SETTLE_ACKS");

describe.skipIf(skip)(title, () => {
  it("settles only the entries the consumer holds, and answers for each id of the batch", async () => {
    const redis = new Redis(REDIS_URL);
    const stream = `${keyPrefix}acks`;
    try {
      await redis.xgroup("CREATE", stream, GROUP, "0", "MKSTREAM");
      const ids: string[] = [];
      for (let n = 0; n < 4; n++) ids.push((await redis.xadd(stream, "*", "b", String(n))) as string);
      const [mine1, theirs, mine2, gone] = ids as [string, string, string, string];
      await redis.xreadgroup("GROUP", GROUP, "a", "COUNT", 1, "STREAMS", stream, ">");
      await redis.xreadgroup("GROUP", GROUP, "b", "COUNT", 1, "STREAMS", stream, ">");
      await redis.xreadgroup("GROUP", GROUP, "a", "COUNT", 2, "STREAMS", stream, ">");
      // Settled before (a resend after a lost reply): no longer pending, no longer in the stream.
      await redis.xack(stream, GROUP, gone);
      await redis.xdel(stream, gone);

      const codes = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        [GROUP, "a", mine1, theirs, mine2, gone],
      );
      expect(codes).toEqual([1, 0, 1, 2]);
      const left = (await redis.xrange(stream, "-", "+")).map(([id]) => id);
      expect(left, "the other consumer's entry stays").toEqual([theirs]);
      const pending = (await redis.xpending(stream, GROUP, "-", "+", 10)) as [string, string][];
      expect(pending.map(([id, consumer]) => [id, consumer])).toEqual([[theirs, "b"]]);
    } finally {
      redis.disconnect();
    }
  });
});
