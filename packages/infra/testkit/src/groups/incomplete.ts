import { type HandlerResult, MessageStatus } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { waitFor } from "../wait-for.js";
import { expectCounters, expectDlqDepth } from "./settlement.js";
import { aborted } from "./util.js";

const INCOMPLETE: { label: string; first: () => HandlerResult }[] = [
  { label: "returned PENDING", first: () => MessageStatus.PENDING },
  { label: "returned DELIVERED", first: () => MessageStatus.DELIVERED },
  { label: "returned EXPIRED", first: () => MessageStatus.EXPIRED },
  {
    label: "a thrown handler",
    first: () => {
      throw new Error("conformance: handler crashed");
    },
  },
];

export function registerIncomplete(env: SuiteEnv): void {
  for (const { label, first } of INCOMPLETE) {
    defineTest(env, "incomplete", {
      title: `${label} is redelivered, never lost or dead-lettered`,
      body: async (h) => {
        const provider = await h.provider();
        const queue = h.queue("incomplete");
        const recorder = collectDeliveries((_d, _s, previous) => (previous === 0 ? first() : "ACKNOWLEDGED"));
        await h.subscribe(provider, queue, recorder.handler, { subscription: "unsure" });
        const body = { label };
        const { id } = await provider.publish(queue, { body });
        await recorder.waitForIds([id], {
          status: "ACKNOWLEDGED",
          timeoutMs: h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs,
        });
        await h.quiet();
        expect(recorder.count(id), "delivered once incomplete, then once more").toBe(2);
        expect(recorder.deliveries[1]!.body).toEqual(body);
        await expectDlqDepth(h, provider, queue, 0);
        // Handed out again after an incomplete handler: a redelivery, not a retry.
        expectCounters(provider, {
          published: 1,
          confirmed: 1,
          acked: 1,
          retried: 0,
          deadLettered: 0,
          redelivered: 1,
          lost: 0,
        });
      },
    });
  }

  defineTest(env, "incomplete", {
    title: "a handler aborted by unsubscribe is redelivered to the next consumer",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("aborted");
      let abortSeen = false;
      const first = collectDeliveries(async (_d, signal) => {
        await aborted(signal);
        abortSeen = true;
        throw new Error("conformance: aborted mid-handler");
      });
      const subscription = await h.subscribe(provider, queue, first.handler, { subscription: "leaving" });
      const body = { work: "long" };
      const { id } = await provider.publish(queue, { body });
      await first.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      await subscription.unsubscribe();
      await waitFor(() => abortSeen, {
        timeoutMs: h.timing.deliveryTimeoutMs,
        description: "the handler's signal to abort on unsubscribe",
      });

      const second = collectDeliveries();
      await h.subscribe(provider, queue, second.handler, { subscription: "arriving" });
      await second.waitForIds([id], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs,
      });
      await h.quiet();
      expect(second.count(id)).toBe(1);
      expect(second.deliveries[0]!.body).toEqual(body);
      expect(first.count(id)).toBe(1);
      await expectDlqDepth(h, provider, queue, 0);
    },
  });
  defineTest(env, "incomplete", {
    title: "a handler past handlerTimeoutMs is aborted and its message redelivered",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("timeout");
      let abortedAfterMs = -1;
      const recorder = collectDeliveries(async (_d, signal, previous) => {
        if (previous > 0) return "ACKNOWLEDGED" as const;
        const started = Date.now();
        await aborted(signal);
        abortedAfterMs = Date.now() - started;
        throw new Error("conformance: timed out");
      });
      await h.subscribe(provider, queue, recorder.handler, { subscription: "slow", handlerTimeoutMs: 300 });
      const { id } = await provider.publish(queue, { body: { slow: true } });
      await recorder.waitForIds([id], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs,
      });
      expect(abortedAfterMs, "the signal fired at the timeout, not before").toBeGreaterThanOrEqual(240);
      expect(recorder.count(id)).toBe(2);
      await expectDlqDepth(h, provider, queue, 0);
    },
  });
}
