import type { QueueProtocol } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv, type TestHarness } from "../harness.js";
import { publishAll, range } from "./util.js";

/** The provider's purge, or undefined (noted in the report) when it offers none. */
function purgeOf(h: TestHarness, provider: QueueProtocol) {
  const purge = provider.admin.purgeDestination?.bind(provider.admin);
  if (purge === undefined) h.note("purgeDestination: not offered by this provider (optional)");
  return purge;
}

export function registerPurge(env: SuiteEnv): void {
  defineTest(env, "cleanup", {
    title: "purgeDestination removes the waiting messages and keeps the queue: later messages are delivered",
    body: async (h) => {
      const provider = await h.provider();
      const purge = purgeOf(h, provider);
      if (purge === undefined) return;
      const queue = h.queue("purge-me");
      await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n })),
      );
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 3, "3 waiting");

      expect(await purge({ destination: queue }), "the 3 waiting messages").toEqual({ purged: 3 });
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 0, "0 waiting after the purge");
      expect(await purge({ destination: queue }), "nothing left to purge").toEqual({ purged: 0 });

      // The queue is still there: a message published now is the only one delivered.
      const consumer = collectDeliveries();
      await h.subscribe(provider, queue, consumer.handler, { subscription: "purge" });
      const [after] = await publishAll(provider, queue, [{ n: 99 }]);
      await consumer.waitForIds([after as string], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs,
      });
      expect(consumer.ids(), "no purged message came back").toEqual([after]);
    },
  });

  defineTest(env, "cleanup", {
    title: "purgeDestination of an unknown queue purges nothing and says why",
    body: async (h) => {
      const provider = await h.provider();
      const purge = purgeOf(h, provider);
      if (purge === undefined) return;
      const unknown = await purge({ destination: h.queue("never-used-purge") });
      expect(unknown.purged).toBe(0);
      expect(unknown.reason).toEqual(expect.any(String));
    },
  });
}
