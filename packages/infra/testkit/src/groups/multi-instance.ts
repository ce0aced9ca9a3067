import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { sleep, waitFor } from "../wait-for.js";
import { publishAll, range } from "./util.js";

/**
 * Several Factflow servers share one broker: whatever one provider instance publishes, dead-letters or
 * reports, another instance on the same broker must see.
 */
export function registerMultiInstance(env: SuiteEnv): void {
  const faults = env.options.faults;
  defineTest(env, "multi-instance", {
    title:
      "two provider instances on one broker compete for a queue, share topics and see the same dead letters",
    notRunWhen: () =>
      faults.kind === "tcp"
        ? undefined
        : `faults.kind is ${faults.kind}: only networked brokers (faults.kind "tcp") are shared between instances`,
    body: async (h) => {
      const first = await h.provider();
      const second = await h.provider();
      const queue = h.queue("shared");
      const slow = () => sleep(10).then(() => "ACKNOWLEDGED" as const);
      const a = collectDeliveries(slow);
      const b = collectDeliveries(slow);
      await h.subscribe(first, queue, a.handler, { subscription: "server-1", prefetch: 2 });
      await h.subscribe(second, queue, b.handler, { subscription: "server-2", prefetch: 2 });
      const ids = await publishAll(
        first,
        queue,
        range(30).map((n) => ({ n })),
      );
      const merged = (id: string) => a.count(id) + b.count(id);
      await waitFor(() => ids.every((id) => merged(id) >= 1), {
        timeoutMs: h.timing.deliveryTimeoutMs,
        description: () =>
          `30 messages across both instances (have ${ids.filter((id) => merged(id) >= 1).length})`,
      });
      await h.quiet();
      for (const id of ids) expect(merged(id), `message ${id} deliveries across instances`).toBe(1);
      expect(b.deliveries.length, "the instance that did not publish got a share").toBeGreaterThan(0);

      const topic = h.topic("shared");
      const listener = collectDeliveries();
      await h.subscribe(second, topic, listener.handler, { subscription: "listener" });
      const { id: signal } = await first.publish(topic, { body: { reload: true } });
      await listener.waitForIds([signal], { timeoutMs: h.timing.deliveryTimeoutMs });

      const rejects = h.queue("shared-dlq");
      const rejecter = collectDeliveries(() => "REJECTED");
      await h.subscribe(second, rejects, rejecter.handler, { subscription: "rejecter" });
      const { id: bad } = await first.publish(rejects, { body: { bad: true } });
      const [letter] = await h.deadLettersUntil(first, { destination: rejects }, 1);
      expect(letter?.message.id, "a dead letter made by one instance is browsable from the other").toBe(bad);
      await h.statsUntil(
        first,
        { destination: rejects },
        (s) => s.dlqDepth === 1 && s.consumers === 1,
        "dlq 1 and the other instance's consumer",
      );
    },
  });
}
