import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { sleep } from "../wait-for.js";
import { field, gate, publishAll, range } from "./util.js";

export function registerOrdering(env: SuiteEnv): void {
  defineTest(env, "ordering: fifo", {
    title: "fifo: one message at a time, in publish order, whatever the concurrency",
    notRunWhen: (caps) => (caps.fifo ? undefined : "capabilities.fifo is false"),
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("fifo");
      // The first message is held, so the rest are all waiting at once: only FIFO keeps them in line.
      const first = gate();
      const recorder = collectDeliveries(async (delivery, signal) => {
        if (field(delivery.message.body, "n") === 0) await first.wait(signal);
        await sleep(2);
        return "ACKNOWLEDGED" as const;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "ordered",
        ordering: "fifo",
        prefetch: 10,
        concurrency: 4,
      });
      const ids = await publishAll(
        provider,
        queue,
        range(20).map((n) => ({ n })),
      );
      await recorder.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      expect(recorder.deliveries.length, "nothing overtakes the held first message").toBe(1);
      first.open();
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs });
      expect(
        recorder.deliveries.map((d) => d.id),
        "delivered in publish order",
      ).toEqual(ids);
      expect(recorder.maxActive(), "one handler at a time").toBe(1);
    },
  });

  defineTest(env, "ordering: message groups", {
    title: "message groups: in order within a group, one at a time per group, groups run concurrently",
    notRunWhen: (caps) => (caps.messageGroups ? undefined : "capabilities.messageGroups is false"),
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("groups");
      const activePerGroup = new Map<string, number>();
      let overlapInGroup = false;
      // The first message of g0 is held: g0 must wait behind it while g1 and g2 carry on.
      const held = gate();
      const recorder = collectDeliveries(async (delivery, signal) => {
        const group = String(field(delivery.message.body, "group"));
        const now = (activePerGroup.get(group) ?? 0) + 1;
        activePerGroup.set(group, now);
        if (now > 1) overlapInGroup = true;
        if (group === "g0" && field(delivery.message.body, "seq") === 0) await held.wait(signal);
        await sleep(5);
        activePerGroup.set(group, (activePerGroup.get(group) ?? 1) - 1);
        return "ACKNOWLEDGED" as const;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "grouped",
        ordering: "fifo",
        groupBy: "group",
        prefetch: 10,
        concurrency: 3,
      });
      const bodies = range(30).map((n) => ({ group: `g${n % 3}`, seq: Math.floor(n / 3) }));
      const ids = await publishAll(provider, queue, bodies);
      const others = ids.filter((_, i) => i % 3 !== 0);
      await recorder.waitForIds(others, { timeoutMs: h.timing.deliveryTimeoutMs, status: "ACKNOWLEDGED" });
      const g0Seen = recorder.deliveries.filter((d) => field(d.body, "group") === "g0").length;
      expect(g0Seen, "g0 waits behind its held first message").toBe(1);
      held.open();
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs });
      for (const g of ["g0", "g1", "g2"]) {
        const seqs = recorder.deliveries
          .filter((d) => field(d.body, "group") === g)
          .map((d) => field(d.body, "seq"));
        expect(seqs, `group ${g} in publish order`).toEqual(range(10));
      }
      expect(overlapInGroup, "two messages of one group never run at once").toBe(false);
      expect(recorder.maxActive(), "different groups run concurrently").toBeGreaterThanOrEqual(2);
      expect(recorder.maxActive()).toBeLessThanOrEqual(3);
    },
  });

  defineTest(env, "ordering: priorities", {
    title: "priorities: waiting messages of higher priority are delivered first",
    notRunWhen: (caps) => (caps.priorities ? undefined : "capabilities.priorities is false"),
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("priority");
      const blocker = gate();
      const recorder = collectDeliveries(async (delivery, signal) => {
        if (field(delivery.message.body, "blocker") === true) await blocker.wait(signal);
        return "ACKNOWLEDGED" as const;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "ranked",
        prefetch: 1,
        maxPriority: 10,
      });
      // Hold the only prefetch slot so the rest wait in the broker, where priority decides.
      const { id: blockerId } = await provider.publish(queue, { body: { blocker: true }, priority: 0 });
      await recorder.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      const low = await publishAll(
        provider,
        queue,
        range(5).map((n) => ({ n, level: "low" })),
        { priority: 1 },
      );
      const high = await publishAll(
        provider,
        queue,
        range(5).map((n) => ({ n, level: "high" })),
        { priority: 9 },
      );
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 10, "10 waiting");
      blocker.open();
      await recorder.waitForIds([...low, ...high], { timeoutMs: h.timing.deliveryTimeoutMs });
      const after = recorder.deliveries.map((d) => d.id).filter((id) => id !== blockerId);
      expect(new Set(after.slice(0, 5)), "all high-priority messages before any low one").toEqual(
        new Set(high),
      );
      expect(recorder.deliveries[0]!.message.priority ?? 0).toBe(0);
      expect(recorder.deliveries.find((d) => d.id === high[0])!.message.priority).toBe(9);
    },
  });
}
