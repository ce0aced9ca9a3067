import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { gate, publishAll, range } from "./util.js";

/**
 * Pausing a consumer (a route with `concurrency: 0`) is unsubscribing; resuming is subscribing again
 * under the same name. Nothing published meanwhile, nor anything in flight at the pause, is lost.
 */
export function registerPauseResume(env: SuiteEnv): void {
  defineTest(env, "pause/resume", {
    title: "pause and resume: messages published while paused wait in the broker, in-flight ones come back",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("paused");
      const held = gate();
      const before = collectDeliveries(async (delivery, signal) => {
        if ((delivery.message.body as { n: number }).n === 0) await held.wait(signal);
        return "ACKNOWLEDGED" as const;
      });
      const first = await provider.subscribe(queue, before.handler, {
        subscription: "route",
        prefetch: 4,
        concurrency: 4,
      });
      const early = await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n })),
      );
      await before.waitForIds(early.slice(1), {
        timeoutMs: h.timing.deliveryTimeoutMs,
        status: "ACKNOWLEDGED",
      });
      // Pause with message 0 still in its handler.
      await first.unsubscribe();
      const late = await publishAll(
        provider,
        queue,
        range(5).map((n) => ({ n: n + 10 })),
      );
      await h.quiet();
      expect(
        before.deliveries.filter((d) => (d.body as { n: number }).n >= 10),
        "nothing is consumed while paused",
      ).toEqual([]);
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 6, "6 waiting while paused");
      const after = collectDeliveries(() => "ACKNOWLEDGED");
      await h.subscribe(provider, queue, after.handler, { subscription: "route", prefetch: 4 });
      await after.waitForIds([early[0] as string, ...late], {
        timeoutMs: h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs,
        status: "ACKNOWLEDGED",
      });
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth + s.inFlight === 0, "drained");
    },
  });
}
