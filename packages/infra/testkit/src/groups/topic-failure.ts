import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { testRetryPolicy } from "./retry.js";
import { expectDeadLetter } from "./settlement.js";
import { publishAll, range } from "./util.js";

export function registerTopicFailure(env: SuiteEnv): void {
  defineTest(env, "topic-failure", {
    title:
      "a failed topic delivery is dead-lettered for that subscription only, after exactly one attempt; redrive reaches only it",
    body: async (h) => {
      const provider = await h.provider();
      const topic = h.topic("partial");
      const policy = testRetryPolicy(env, h.caps.delayGranularityMs);
      let badFails = true;
      const good = collectDeliveries();
      const other = collectDeliveries();
      const bad = collectDeliveries(() =>
        badFails ? { status: "FAILED", reason: "conformance: subscriber down" } : "ACKNOWLEDGED",
      );
      await h.subscribe(provider, topic, good.handler, { subscription: "good" });
      await h.subscribe(provider, topic, bad.handler, { subscription: "bad", retry: policy });
      await h.subscribe(provider, topic, other.handler, { subscription: "other" });
      const bodies = range(3).map((n) => ({ n }));
      const ids = await publishAll(provider, topic, bodies);
      for (const r of [good, other]) await r.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs });
      const letters = await h.deadLettersUntil(provider, { destination: topic, subscription: "bad" }, 3);
      // Long enough for a wrongly scheduled retry to show up.
      await h.quiet(policy.initialDelayMs * h.timing.retryUpperFactor + h.expectations.retryDelaySlackMs);
      for (const id of ids) {
        expect(bad.count(id), "the failing subscription got one attempt").toBe(1);
        expect(good.count(id), "other subscriptions are untouched").toBe(1);
        expect(other.count(id)).toBe(1);
      }
      const byId = new Map(letters.map((l) => [l.message.id, l]));
      for (const [i, id] of ids.entries()) {
        expectDeadLetter(byId.get(id), { id, body: bodies[i], reason: "topic-failure", attempts: 1 });
      }
      const goodLetters = await provider.admin.browseDeadLetters(
        { destination: topic, subscription: "good" },
        { offset: 0, limit: 10 },
      );
      expect(goodLetters.total, "no dead letters for the healthy subscription").toBe(0);

      badFails = false;
      const { redriven } = await provider.admin.redriveAll({ destination: topic, subscription: "bad" });
      expect(redriven, "redriveAll reports exactly the 3 dead letters").toBe(3);
      await bad.waitForIds(ids, { status: "ACKNOWLEDGED", timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      for (const id of ids) {
        expect(bad.count(id)).toBe(2);
        expect(good.count(id), "a redrive for one subscription never reaches the others").toBe(1);
        expect(other.count(id)).toBe(1);
      }
      await h.deadLettersUntil(provider, { destination: topic, subscription: "bad" }, 0);
    },
  });
}
