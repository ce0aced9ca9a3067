import { type MessageHandler, MessageStatus, type SettledDelivery } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createRedisProvider } from "../src/index.js";
import { REDIS_URL, redisTestFile } from "./helpers.js";

const { keyPrefix, skip, title } = await redisTestFile("a handler's settleAfter on Redis");

describe.skipIf(skip)(title, () => {
  it("frees the handler slot while it waits, and a stop settles the delivery instead of handing it back", async () => {
    const queue = "/queue/settle-after/work";
    const provider = createRedisProvider({ url: REDIS_URL, keyPrefix });
    await provider.connect();
    try {
      const first = (await provider.publish(queue, { body: { n: 1 } })).id;
      const second = (await provider.publish(queue, { body: { n: 2 } })).id;
      let commit!: () => void;
      const committed = new Promise<void>((resolve) => (commit = resolve));
      const settled: SettledDelivery[] = [];
      let secondSettled!: () => void;
      const secondDone = new Promise<void>((resolve) => (secondSettled = resolve));
      const handler: MessageHandler = ({ message }) =>
        message.id === first
          ? { status: MessageStatus.ACKNOWLEDGED, settleAfter: committed }
          : MessageStatus.ACKNOWLEDGED;
      const subscription = await provider.subscribe(queue, handler, {
        subscription: "work",
        concurrency: 1,
        prefetch: 4,
        onSettled: (event) => {
          settled.push(event);
          if (event.messageId === second) secondSettled();
        },
      });
      // One handler slot: the second message runs only because the first one's handler returned.
      await secondDone;
      expect(settled.map((s) => [s.messageId, s.kind])).toEqual([[second, "acked"]]);

      const stopped = subscription.unsubscribe();
      commit();
      await stopped;
      expect(settled.map((s) => [s.messageId, s.kind])).toEqual([
        [second, "acked"],
        [first, "acked"],
      ]);
      expect(provider.counters()).toMatchObject({ acked: 2, redelivered: 0, superseded: 0 });
      expect(await provider.admin.stats({ destination: queue })).toMatchObject({ depth: 0, inFlight: 0 });
    } finally {
      await provider.close();
    }
  }, 60_000);
});
