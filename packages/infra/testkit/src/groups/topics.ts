import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { publishAll, range } from "./util.js";

export function registerTopics(env: SuiteEnv): void {
  defineTest(env, "topics", {
    title: "a topic fans every message out to every subscription name, once each",
    body: async (h) => {
      const provider = await h.provider();
      const topic = h.topic("fanout");
      const names = ["audit", "index", "notify"];
      const recorders = names.map(() => collectDeliveries());
      for (const [i, name] of names.entries()) {
        await h.subscribe(provider, topic, recorders[i]!.handler, { subscription: name });
      }
      const ids = await publishAll(
        provider,
        topic,
        range(10).map((n) => ({ n })),
      );
      for (const recorder of recorders)
        await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      for (const [i, recorder] of recorders.entries()) {
        expect(recorder.deliveries.length, `subscription ${names[i]} deliveries`).toBe(10);
        expect(new Set(recorder.ids())).toEqual(new Set(ids));
        for (const d of recorder.deliveries) {
          expect(d.subscription).toBe(names[i]);
          expect(d.destination).toBe(topic);
        }
      }
    },
  });
}
