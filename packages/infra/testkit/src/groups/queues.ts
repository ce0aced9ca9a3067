import { Headers } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { sleep, waitFor } from "../wait-for.js";
import { field, gate, publishAll, range } from "./util.js";

export function registerQueues(env: SuiteEnv): void {
  defineTest(env, "queues", {
    title:
      "a message published before any consumer waits and arrives with its envelope intact; unsubscribe is idempotent",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("envelope");
      const body = { text: "héllo", n: 42, nested: { list: [1, "two", null, true] } };
      const plain = await provider.publish(queue, { body });
      const explicit = await provider.publish(queue, {
        body: "second",
        id: `conformance-${env.runId}-explicit`,
        headers: { "x-conformance": "yes" },
        correlationId: "corr-1",
        executionId: "exec-1",
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      });
      expect(explicit.id).toBe(`conformance-${env.runId}-explicit`);
      const recorder = collectDeliveries();
      const subscription = await h.subscribe(provider, queue, recorder.handler, { subscription: "reader" });
      await recorder.waitForIds([plain.id, explicit.id], { timeoutMs: h.timing.deliveryTimeoutMs });
      const first = recorder.deliveries.find((d) => d.id === plain.id)!;
      expect(first.body).toEqual(body);
      expect(first.attempt).toBe(1);
      expect(first.headers[Headers.deliveryAttempt]).toBe("1");
      expect(first.destination).toBe(queue);
      expect(first.subscription).toBe("reader");
      const second = recorder.deliveries.find((d) => d.id === explicit.id)!;
      expect(second.body).toBe("second");
      expect(second.headers["x-conformance"]).toBe("yes");
      expect(second.message.correlationId).toBe("corr-1");
      expect(second.message.executionId).toBe("exec-1");
      expect(second.message.traceparent).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
      expect(first.message.correlationId, "correlationId defaults to the message id").toBe(plain.id);
      expect(Number.isNaN(Date.parse(first.message.publishedAt)), "publishedAt is ISO-8601").toBe(false);
      expect(plain.id).not.toBe(explicit.id);
      await h.quiet();
      expect(recorder.deliveries.length, "each message delivered once").toBe(2);
      await subscription.unsubscribe();
      await subscription.unsubscribe();
    },
  });

  defineTest(env, "queues", {
    title: "competing consumers: each message goes to exactly one subscription",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("compete");
      const slow = () => sleep(10).then(() => "ACKNOWLEDGED" as const);
      const a = collectDeliveries(slow);
      const b = collectDeliveries(slow);
      await h.subscribe(provider, queue, a.handler, { subscription: "worker-a", prefetch: 2 });
      await h.subscribe(provider, queue, b.handler, { subscription: "worker-b", prefetch: 2 });
      const ids = await publishAll(
        provider,
        queue,
        range(40).map((n) => ({ n })),
      );
      const merged = (id: string) => a.count(id) + b.count(id);
      await waitFor(() => ids.every((id) => merged(id) >= 1), {
        timeoutMs: h.timing.deliveryTimeoutMs,
        description: () => `all 40 messages (have ${ids.filter((id) => merged(id) >= 1).length})`,
      });
      await h.quiet();
      for (const id of ids) expect(merged(id), `message ${id} deliveries`).toBe(1);
      expect(a.deliveries.length, "worker-a got a share").toBeGreaterThan(0);
      expect(b.deliveries.length, "worker-b got a share").toBeGreaterThan(0);
    },
  });

  defineTest(env, "queues", {
    title: "prefetch bounds unsettled deliveries and concurrency bounds running handlers",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("prefetch");
      const release = gate();
      const recorder = collectDeliveries(async (_delivery, signal) => {
        await release.wait(signal);
        return "ACKNOWLEDGED" as const;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "bounded",
        prefetch: 4,
        concurrency: 2,
      });
      const ids = await publishAll(
        provider,
        queue,
        range(12).map((n) => ({ n })),
      );
      await recorder.waitForCount(2, { timeoutMs: h.timing.deliveryTimeoutMs });
      const stats = await h.statsUntil(
        provider,
        { destination: queue },
        (s) => s.inFlight >= 2 && s.depth + s.inFlight === 12,
        "2 to 4 in flight and the rest waiting",
      );
      await h.quiet();
      expect(recorder.active(), "handlers running at once").toBe(2);
      expect(recorder.deliveries.length, "nothing beyond the running handlers was handed to them").toBe(2);
      const later = await provider.admin.stats({ destination: queue });
      expect(
        Math.max(stats.inFlight, later.inFlight),
        "unsettled deliveries never exceed prefetch",
      ).toBeLessThanOrEqual(4);
      release.open();
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs, status: "ACKNOWLEDGED" });
      expect(recorder.maxActive()).toBe(2);
    },
  });

  defineTest(env, "queues", {
    title:
      "deliveries held unsettled never stall the rest: while a handler is free and fewer than prefetch are unsettled, the next message is delivered",
    body: async (h) => {
      // A route whose batch keeps its members unsettled until later messages complete it: seven held
      // (more than half the window), four acknowledged at once, all in the queue before the first read.
      const provider = await h.provider();
      const queue = h.queue("held");
      const ids = await publishAll(
        provider,
        queue,
        range(11).map((n) => ({ n, hold: n < 7 })),
      );
      const release = gate();
      const recorder = collectDeliveries(async (delivery, signal) => {
        if (field(delivery.message.body, "hold") === true) await release.wait(signal);
        return "ACKNOWLEDGED" as const;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "holder",
        prefetch: 10,
        concurrency: 8,
      });
      await recorder.waitForIds(ids.slice(7), {
        timeoutMs: h.timing.deliveryTimeoutMs,
        status: "ACKNOWLEDGED",
      });
      expect(recorder.active(), "the held handlers are still running").toBe(7);
      release.open();
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs, status: "ACKNOWLEDGED" });
      await h.quiet();
      expect(recorder.deliveries.length, "each message delivered once").toBe(11);
    },
  });

  defineTest(env, "queues", {
    title: "concurrency defaults to one handler at a time",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("serial");
      const recorder = collectDeliveries(() => sleep(15).then(() => "ACKNOWLEDGED" as const));
      await h.subscribe(provider, queue, recorder.handler, { subscription: "serial", prefetch: 10 });
      const ids = await publishAll(
        provider,
        queue,
        range(8).map((n) => ({ n })),
      );
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs });
      expect(recorder.maxActive()).toBe(1);
    },
  });
  defineTest(env, "queues", {
    title: "a delayed publish (delayMs) is delivered no earlier than asked, and counts as waiting meanwhile",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("delayed");
      const delayMs = Math.max(400, h.caps.delayGranularityMs * 2);
      const recorder = collectDeliveries();
      await h.subscribe(provider, queue, recorder.handler, { subscription: "patient" });
      const publishedAt = performance.now();
      const { id } = await provider.publish(queue, { body: { later: true }, delayMs });
      const { id: now } = await provider.publish(queue, { body: { later: false } });
      await recorder.waitForIds([now], { timeoutMs: h.timing.deliveryTimeoutMs });
      if (performance.now() - publishedAt < delayMs * 0.5) {
        expect(recorder.count(id), "not delivered before its delay").toBe(0);
        const stats = await provider.admin.stats({ destination: queue });
        expect(stats.depth + stats.inFlight, "a scheduled message is still counted").toBeGreaterThanOrEqual(
          1,
        );
      }
      await recorder.waitForIds([id], {
        timeoutMs: h.timing.deliveryTimeoutMs + delayMs * h.timing.retryUpperFactor,
      });
      const took = recorder.deliveries.find((d) => d.id === id)!.receivedAt - publishedAt;
      // Not earlier than asked is asserted; how much later is printed (speed goals live in bench/).
      expect(took, `delivered after ${Math.round(took)} ms for delayMs ${delayMs}`).toBeGreaterThanOrEqual(
        delayMs * h.timing.retryLowerFactor,
      );
      h.note(`queues: a delayMs ${delayMs} publish was delivered after ${Math.round(took)} ms`);
      expect(
        recorder.deliveries.map((d) => d.id),
        "the undelayed message went first",
      ).toEqual([now, id]);
    },
  });
  defineTest(env, "queues", {
    title: "names that differ only in separators are different destinations",
    body: async (h) => {
      const provider = await h.provider();
      const base = h.queue("names");
      // A naming strategy that maps "/" to "." or escapes loosely would merge some of these.
      const queues = [
        `${base}/a/b`,
        `${base}/a.b`,
        `${base}/a_b`,
        `${base}/a-b`,
        `${base}/a:b`,
        `${base}/A/B`,
      ];
      const topics = queues.map((q) => q.replace("/queue/", "/topic/"));
      for (const d of [...queues, ...topics]) h.env.destinations.add(d);
      const recorders = [...queues, ...topics].map(() => collectDeliveries());
      for (const [i, d] of [...queues, ...topics].entries()) {
        await h.subscribe(provider, d, recorders[i]!.handler, { subscription: "only-mine" });
      }
      const ids: string[] = [];
      for (const d of [...queues, ...topics]) ids.push((await provider.publish(d, { body: { to: d } })).id);
      for (const [i, recorder] of recorders.entries()) {
        await recorder.waitForIds([ids[i]!], { timeoutMs: h.timing.deliveryTimeoutMs });
      }
      await h.quiet();
      for (const [i, recorder] of recorders.entries()) {
        expect(recorder.ids(), `only its own message reaches ${[...queues, ...topics][i]}`).toEqual([ids[i]]);
      }
    },
  });
}
