import type { DeadLetterSource, DeleteDestinationOptions, QueueProtocol } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv, type TestHarness } from "../harness.js";
import { waitFor } from "../wait-for.js";
import { publishAll, range } from "./util.js";

/**
 * Deletes once the broker has let go of the consumers of a subscription that was just stopped
 * (some brokers detach them asynchronously); any other refusal is returned as it is.
 */
async function deleteWhenDetached(
  h: TestHarness,
  provider: QueueProtocol,
  source: DeadLetterSource,
  options: DeleteDestinationOptions,
) {
  let last: Awaited<ReturnType<QueueProtocol["admin"]["deleteDestination"]>> | undefined;
  return waitFor(
    async () => {
      last = await provider.admin.deleteDestination(source, options);
      return last.deleted || !/consumer/.test(last.reason ?? "") ? last : undefined;
    },
    {
      timeoutMs: h.timing.deliveryTimeoutMs,
      intervalMs: 100,
      description: () =>
        `deleting ${source.destination} once its consumers detached (last: ${JSON.stringify(last)})`,
    },
  );
}

export function registerCleanup(env: SuiteEnv): void {
  defineTest(env, "cleanup", {
    title:
      "deleteDestination removes a used, drained queue; deleting it again or an unknown queue is deleted:false",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("delete-me");
      const consumer = collectDeliveries();
      const subscription = await h.subscribe(provider, queue, consumer.handler, { subscription: "cleanup" });
      const [id] = await publishAll(provider, queue, [{ n: 1 }]);
      await consumer.waitForIds([id as string], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs,
      });
      await subscription.unsubscribe();

      const first = await deleteWhenDetached(h, provider, { destination: queue }, { ifEmpty: true });
      expect(first, "a drained queue is deleted").toMatchObject({ deleted: true });
      const again = await provider.admin.deleteDestination({ destination: queue }, { ifEmpty: true });
      expect(again.deleted, "a deleted queue is gone: deleting it again finds nothing").toBe(false);
      expect(again.reason, "the refusal says why").toEqual(expect.any(String));

      const unknown = await provider.admin.deleteDestination({ destination: h.queue("never-used") });
      expect(unknown.deleted, "an unknown queue is deleted:false, not an error").toBe(false);
      expect(unknown.reason).toEqual(expect.any(String));
    },
  });

  defineTest(env, "cleanup", {
    title: "ifEmpty refuses while messages wait and leaves them deliverable; without it they are dropped",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("delete-busy");
      const ids = await publishAll(
        provider,
        queue,
        range(3).map((n) => ({ n })),
      );
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 3, "3 waiting");

      const refused = await provider.admin.deleteDestination({ destination: queue }, { ifEmpty: true });
      expect(refused.deleted, "ifEmpty with 3 waiting messages").toBe(false);
      expect(refused.reason).toMatch(/not empty|waiting/);

      const consumer = collectDeliveries();
      const subscription = await h.subscribe(provider, queue, consumer.handler, { subscription: "cleanup" });
      await consumer.waitForIds(ids, { status: "ACKNOWLEDGED", timeoutMs: h.timing.deliveryTimeoutMs });
      await subscription.unsubscribe();

      const leftover = await publishAll(provider, queue, [{ n: 99 }]);
      expect(leftover).toHaveLength(1);
      await h.statsUntil(provider, { destination: queue }, (s) => s.depth === 1, "1 waiting");
      const forced = await deleteWhenDetached(h, provider, { destination: queue }, {});
      expect(forced, "without ifEmpty a queue with waiting messages is deleted").toMatchObject({
        deleted: true,
      });
      const gone = await provider.admin.deleteDestination({ destination: queue });
      expect(gone.deleted, "and it is gone").toBe(false);
    },
  });

  defineTest(env, "cleanup", {
    title:
      "dead letters survive the delete of their queue, stay browsable, and go only with keepDeadLetters: false",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("delete-dlq");
      const source = { destination: queue };
      const rejecter = collectDeliveries(() => ({ status: "REJECTED", reason: "conformance: cleanup" }));
      const subscription = await h.subscribe(provider, queue, rejecter.handler, { subscription: "cleanup" });
      const ids = await publishAll(
        provider,
        queue,
        range(2).map((n) => ({ n })),
      );
      await h.deadLettersUntil(provider, source, 2);
      await subscription.unsubscribe();

      const result = await deleteWhenDetached(h, provider, source, { ifEmpty: true });
      expect(result, "the drained queue is deleted, its 2 dead letters kept").toMatchObject({
        deleted: true,
        deadLettersKept: 2,
      });
      const letters = await h.allDeadLetters(provider, source);
      expect(letters.map((l) => l.message.id).sort(), "dead letters browsable after the delete").toEqual(
        [...ids].sort(),
      );

      const dropped = await provider.admin.deleteDestination(source, { keepDeadLetters: false });
      expect(dropped, "keepDeadLetters: false removes the dead letters too").toMatchObject({ deleted: true });
      expect((await provider.admin.browseDeadLetters(source, { offset: 0, limit: 10 })).total).toBe(0);
    },
  });
}
