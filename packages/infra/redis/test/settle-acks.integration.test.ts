import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { GROUP } from "../src/naming.js";
import { runScript, SETTLE_ACKS, settleAcksArgs } from "../src/scripts.js";
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
        settleAcksArgs(GROUP, "a", [mine1, theirs, mine2, gone]),
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

  it("never acknowledges an entry another consumer claimed, inside the batch's id range or not", async () => {
    const redis = new Redis(REDIS_URL);
    const stream = `${keyPrefix}takeover`;
    try {
      await redis.xgroup("CREATE", stream, GROUP, "0", "MKSTREAM");
      const ids: string[] = [];
      for (let n = 0; n < 5; n++) ids.push((await redis.xadd(stream, "*", "b", String(n))) as string);
      const [first, claimed, kept, claimedLast, last] = ids as [string, string, string, string, string];
      await redis.xreadgroup("GROUP", GROUP, "a", "COUNT", 5, "STREAMS", stream, ">");
      // Another consumer takes two of a's entries over (a visibility timeout or a dead-node claim).
      await redis.xclaim(stream, GROUP, "b", 0, claimed, claimedLast, "JUSTID");

      const codes = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        settleAcksArgs(GROUP, "a", [last, claimed, first, claimedLast]),
      );
      expect(codes).toEqual([1, 0, 1, 0]);
      const pending = (await redis.xpending(stream, GROUP, "-", "+", 10)) as [string, string][];
      expect(
        pending.map(([id, consumer]) => [id, consumer]),
        "the claimed entries stay with b, the unsettled one in the range with a",
      ).toEqual([
        [claimed, "b"],
        [kept, "a"],
        [claimedLast, "b"],
      ]);
      expect((await redis.xrange(stream, "-", "+")).map(([id]) => id)).toEqual([claimed, kept, claimedLast]);
    } finally {
      redis.disconnect();
    }
  });

  it("answers for every id when the consumer holds more entries in the batch's range than one reply lists", async () => {
    const redis = new Redis(REDIS_URL);
    const stream = `${keyPrefix}wide`;
    try {
      await redis.xgroup("CREATE", stream, GROUP, "0", "MKSTREAM");
      const pipeline = redis.pipeline();
      for (let n = 0; n < 300; n++) pipeline.xadd(stream, "*", "b", String(n));
      const ids = ((await pipeline.exec()) ?? []).map(([, id]) => id as string);
      await redis.xreadgroup("GROUP", GROUP, "a", "COUNT", 300, "STREAMS", stream, ">");
      const theirs = ids[250] as string;
      await redis.xclaim(stream, GROUP, "b", 0, theirs, "JUSTID");
      // The range first..last holds 299 of a's entries: far more than the reply's COUNT for 4 ids.
      const batch = [ids[0], ids[299], theirs, ids[200]] as string[];

      const codes = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        settleAcksArgs(GROUP, "a", batch),
      );
      expect(codes).toEqual([1, 1, 0, 1]);
      const [count] = (await redis.xpending(stream, GROUP)) as [number];
      expect(count, "300 pending, 3 settled").toBe(297);
      const owners = (await redis.xpending(stream, GROUP, theirs, theirs, 1)) as [string, string][];
      expect(owners.map(([, consumer]) => consumer)).toEqual(["b"]);
      expect(await redis.xlen(stream)).toBe(297);
    } finally {
      redis.disconnect();
    }
  });

  it("answers -1 for every id when the group is gone", async () => {
    const redis = new Redis(REDIS_URL);
    const stream = `${keyPrefix}nogroup`;
    try {
      const id = (await redis.xadd(stream, "*", "b", "x")) as string;
      const codes = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        settleAcksArgs(GROUP, "a", [id, "1-1"]),
      );
      expect(codes).toEqual([-1, -1]);
      expect(await redis.xlen(stream)).toBe(1);
    } finally {
      redis.disconnect();
    }
  });

  it("gives every id the right answer whatever id range it is handed", async () => {
    const redis = new Redis(REDIS_URL);
    const stream = `${keyPrefix}range`;
    try {
      await redis.xgroup("CREATE", stream, GROUP, "0", "MKSTREAM");
      const ids: string[] = [];
      for (let n = 0; n < 4; n++) ids.push((await redis.xadd(stream, "*", "b", String(n))) as string);
      const [mine1, theirs, mine2, mine3] = ids as [string, string, string, string];
      await redis.xreadgroup("GROUP", GROUP, "a", "COUNT", 4, "STREAMS", stream, ">");
      await redis.xclaim(stream, GROUP, "b", 0, theirs, "JUSTID");
      // A range that covers only part of the batch, then one that is not an id at all.
      const narrow = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        [GROUP, "a", theirs, theirs, mine1, theirs, mine2],
      );
      expect(narrow).toEqual([1, 0, 1]);
      const broken = await runScript<number[]>(
        redis,
        SETTLE_ACKS,
        [stream],
        [GROUP, "a", "x", "y", mine3, theirs],
      );
      expect(broken).toEqual([1, 0]);
      const pending = (await redis.xpending(stream, GROUP, "-", "+", 10)) as [string, string][];
      expect(pending.map(([id, consumer]) => [id, consumer])).toEqual([[theirs, "b"]]);
    } finally {
      redis.disconnect();
    }
  });
});
