import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { gate, publishAll, range } from "./util.js";

export function registerStats(env: SuiteEnv): void {
  defineTest(env, "stats", {
    title: "stats report depth, consumers, in flight and dead-letter depth",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("stats");
      const source = { destination: queue };
      await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n })),
      );
      const idle = await h.statsUntil(provider, source, (s) => s.depth === 3, "depth 3");
      expect(idle).toMatchObject({ destination: queue, depth: 3, consumers: 0, inFlight: 0, dlqDepth: 0 });

      const release = gate();
      let rejectNext = true;
      const recorder = collectDeliveries(async (_delivery, signal) => {
        await release.wait(signal);
        if (rejectNext) {
          rejectNext = false;
          return "REJECTED";
        }
        return "ACKNOWLEDGED";
      });
      await h.subscribe(provider, queue, recorder.handler, { subscription: "held", prefetch: 1 });
      await recorder.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      await h.statsUntil(
        provider,
        source,
        (s) => s.consumers === 1 && s.inFlight === 1 && s.depth === 2 && s.dlqDepth === 0,
        "1 consumer, 1 in flight, depth 2",
      );
      release.open();
      await h.statsUntil(
        provider,
        source,
        (s) => s.consumers === 1 && s.inFlight === 0 && s.depth === 0 && s.dlqDepth === 1,
        "depth 0, in flight 0, dlq 1",
      );
      expect(recorder.deliveries.length).toBe(3);
    },
  });

  defineTest(env, "stats", {
    title:
      "listDestinations names the queues and topics in use, with topic subscriptions; topic stats are per subscription",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("listed");
      const topic = h.topic("listed");
      await provider.publish(queue, { body: 1 });
      const recorder = collectDeliveries();
      await h.subscribe(provider, topic, recorder.handler, { subscription: "first" });
      await h.subscribe(provider, topic, collectDeliveries().handler, { subscription: "second" });
      const { id } = await provider.publish(topic, { body: 2 });
      await recorder.waitForIds([id], { timeoutMs: h.timing.deliveryTimeoutMs });
      const listed = await provider.admin.listDestinations();
      const q = listed.find((d) => d.destination === queue);
      const t = listed.find((d) => d.destination === topic);
      expect(q, `${queue} is listed`).toMatchObject({ kind: "queue" });
      expect(t, `${topic} is listed`).toMatchObject({ kind: "topic" });
      expect([...(t!.subscriptions ?? [])].sort()).toEqual(["first", "second"]);
      const sub = await h.statsUntil(
        provider,
        { destination: topic, subscription: "first" },
        (s) => s.consumers === 1 && s.depth === 0 && s.inFlight === 0,
        "1 consumer and nothing waiting on subscription first",
      );
      expect(sub).toMatchObject({ destination: topic, subscription: "first", dlqDepth: 0 });
    },
  });
}
