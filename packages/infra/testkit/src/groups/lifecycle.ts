import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { waitFor } from "../wait-for.js";
import { aborted } from "./util.js";

export function registerLifecycle(env: SuiteEnv): void {
  defineTest(env, "lifecycle", {
    title:
      "connect and close are idempotent, even when called concurrently, and the provider reports its name",
    body: async (h) => {
      const provider = await h.build();
      expect(provider.name).toBe(env.options.name);
      await Promise.all([provider.connect(), provider.connect()]);
      await provider.connect();
      const queue = h.queue("lifecycle");
      const receipt = await provider.publish(queue, { body: { ok: true } });
      expect(typeof receipt.id).toBe("string");
      await Promise.all([provider.close(), provider.close()]);
      await provider.close();
    },
  });

  defineTest(env, "lifecycle", {
    title: "every call after close rejects with code provider_closed",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("closed");
      await provider.close();
      const calls: [string, () => Promise<unknown>][] = [
        ["publish", () => provider.publish(queue, { body: 1 })],
        ["subscribe", () => provider.subscribe(queue, () => "ACKNOWLEDGED", { subscription: "after-close" })],
        ["admin.stats", () => provider.admin.stats({ destination: queue })],
        [
          "admin.browseDeadLetters",
          () => provider.admin.browseDeadLetters({ destination: queue }, { offset: 0, limit: 1 }),
        ],
      ];
      for (const [what, call] of calls) {
        let thrown: unknown;
        try {
          await call();
        } catch (error) {
          thrown = error;
        }
        expect(thrown, `${what} after close should reject`).toBeInstanceOf(Error);
        expect((thrown as { code?: unknown }).code, `${what} after close: code`).toBe("provider_closed");
      }
    },
  });

  defineTest(env, "lifecycle", {
    title: "close aborts running handlers and resolves promptly",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("close-aborts");
      let sawAbort = false;
      const recorder = collectDeliveries(async (_delivery, signal) => {
        await aborted(signal);
        sawAbort = true;
        throw new Error("aborted by close");
      });
      await h.subscribe(provider, queue, recorder.handler, { subscription: "held" });
      await provider.publish(queue, { body: { hold: true } });
      await recorder.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      const started = Date.now();
      // The handler ends only when its signal aborts, so a close that waited for it would never
      // resolve (the test's timeout catches that); how long close took is printed, not asserted.
      await provider.close();
      const closedAfterMs = Date.now() - started;
      await waitFor(() => sawAbort, {
        timeoutMs: h.timing.deliveryTimeoutMs,
        description: "the handler's signal to abort on close",
      });
      h.note(`lifecycle: close with a held handler resolved after ${closedAfterMs} ms`);
    },
  });
}
