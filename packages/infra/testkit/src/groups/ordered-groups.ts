import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { sleep } from "../wait-for.js";
import { field, publishAll, range } from "./util.js";

const KEYS = 4;
const PER_KEY = 8;

/** Why a provider without ordered groups is not asked to keep them. */
const needsOrderedGroups = (caps: { orderedGroups?: boolean }) =>
  caps.orderedGroups === true ? undefined : "capabilities.orderedGroups is not true";

export function registerOrderedGroups(env: SuiteEnv): void {
  for (const source of ["body path", "header"] as const) {
    defineTest(env, "ordering: groups with retries", {
      title: `ordered groups keyed by a ${source}: a failed message holds its group through its retry, other groups go on`,
      notRunWhen: needsOrderedGroups,
      body: async (h) => {
        const provider = await h.provider();
        const queue = h.queue("keyed");
        const keyOf = (d: { body: unknown }) => String(field(field(d.body as never, "order") ?? null, "key"));
        // The third message of every key fails on its first attempt.
        const recorder = collectDeliveries(async (delivery, _signal, previous) => {
          await sleep(2);
          return field(delivery.message.body, "seq") === 2 && previous === 0 ? "FAILED" : "ACKNOWLEDGED";
        });
        await h.subscribe(provider, queue, recorder.handler, {
          subscription: "keyed",
          ordering: "fifo",
          ...(source === "header" ? { groupByHeader: "x-order-key" } : { groupBy: "order.key" }),
          prefetch: 32,
          concurrency: 4,
          retry: { maxAttempts: 3, initialDelayMs: 300, multiplier: 1 },
        });
        const ids: string[] = [];
        for (const seq of range(PER_KEY)) {
          for (const k of range(KEYS)) {
            const key = `k${k}`;
            ids.push(
              ...(await publishAll(provider, queue, [{ order: { key }, seq }], {
                headers: { "x-order-key": key },
              })),
            );
          }
        }
        await recorder.waitForIds(ids, {
          timeoutMs: h.timing.deliveryTimeoutMs * 2,
          status: "ACKNOWLEDGED",
        });
        for (const k of range(KEYS)) {
          const seqs = recorder.deliveries
            .filter((d) => keyOf(d) === `k${k}`)
            .map((d) => `${String(field(d.body, "seq"))}@${d.attempt}`);
          const expected = range(PER_KEY).flatMap((seq) => (seq === 2 ? ["2@1", "2@2"] : [`${seq}@1`]));
          expect(seqs, `key k${k}: in publish order, its retry before anything newer`).toEqual(expected);
        }
        // While k0's failed message waited for its retry, other keys were handled.
        const firstTry = recorder.deliveries.findIndex(
          (d) => keyOf(d) === "k0" && field(d.body, "seq") === 2,
        );
        const retry = recorder.deliveries.findIndex(
          (d) => keyOf(d) === "k0" && field(d.body, "seq") === 2 && d.attempt === 2,
        );
        const between = recorder.deliveries.slice(firstTry + 1, retry).filter((d) => keyOf(d) !== "k0");
        expect(between.length, "other keys progress while one key waits for its retry").toBeGreaterThan(0);
        expect(recorder.maxActive()).toBeLessThanOrEqual(4);
        await h.statsUntil(provider, { destination: queue }, (s) => s.depth + s.inFlight === 0, "drained");
        const dead = await provider.admin.browseDeadLetters({ destination: queue }, { offset: 0, limit: 1 });
        expect(dead.total, "a retried message is not dead-lettered").toBe(0);
      },
    });
  }

  defineTest(env, "ordering: groups with retries", {
    title: "ordered groups: a message whose attempts are spent is dead-lettered and frees its group",
    notRunWhen: needsOrderedGroups,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("keyed-dead");
      const recorder = collectDeliveries((delivery) =>
        field(delivery.message.body, "seq") === 0 ? "FAILED" : "ACKNOWLEDGED",
      );
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "keyed",
        ordering: "fifo",
        groupBy: "key",
        retry: { maxAttempts: 2, initialDelayMs: 100, multiplier: 1 },
      });
      const ids = await publishAll(
        provider,
        queue,
        range(3).map((seq) => ({ key: "a", seq })),
      );
      await recorder.waitForIds(ids.slice(1), {
        timeoutMs: h.timing.deliveryTimeoutMs,
        status: "ACKNOWLEDGED",
      });
      expect(recorder.deliveries.map((d) => `${String(field(d.body, "seq"))}@${d.attempt}`)).toEqual([
        "0@1",
        "0@2",
        "1@1",
        "2@1",
      ]);
      const dead = await h.deadLettersUntil(provider, { destination: queue }, 1);
      expect(dead[0]?.message.id).toBe(ids[0]);
    },
  });
}
