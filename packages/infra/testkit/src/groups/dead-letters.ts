import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { expectDeadLetter, expectDlqDepth } from "./settlement.js";
import { publishAll, range } from "./util.js";

/**
 * Dead letters in the "deep" test: more than a broker's management page (Artemis answers
 * `countMessages` and `listMessages` from the first `management-browse-page-size` messages, 200 by
 * default), so an admin that counts or lists through such a call misses the letters after it.
 */
const DEEP_LETTERS = 250;

export function registerDeadLetters(env: SuiteEnv): void {
  defineTest(env, "dead-letters", {
    title:
      "browse pages exact contents without removing; discard one, redrive one, redrive all with exact counts",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("dlq");
      const source = { destination: queue };
      const rejecter = collectDeliveries(() => ({ status: "REJECTED", reason: "conformance: bad record" }));
      const subscription = await h.subscribe(provider, queue, rejecter.handler, { subscription: "rejecter" });
      const bodies = range(5).map((n) => ({ n, payload: `record-${n}` }));
      const ids = await publishAll(provider, queue, bodies);
      await h.deadLettersUntil(provider, source, 5);
      await subscription.unsubscribe();
      // Oldest first means in the order they were dead-lettered, which is the order the handler saw them.
      const order = rejecter.deliveries.map((d) => d.id);
      const bodyOf = new Map(ids.map((id, i) => [id, bodies[i]]));

      const pages = [
        await provider.admin.browseDeadLetters(source, { offset: 0, limit: 2 }),
        await provider.admin.browseDeadLetters(source, { offset: 2, limit: 2 }),
        await provider.admin.browseDeadLetters(source, { offset: 4, limit: 2 }),
        await provider.admin.browseDeadLetters(source, { offset: 5, limit: 2 }),
      ];
      expect(pages.map((p) => p.total)).toEqual([5, 5, 5, 5]);
      expect(pages.map((p) => p.offset)).toEqual([0, 2, 4, 5]);
      expect(pages.map((p) => p.items.length)).toEqual([2, 2, 1, 0]);
      const browsed = pages.flatMap((p) => p.items);
      expect(
        browsed.map((l) => l.message.id),
        "pages in dead-letter order, no overlap",
      ).toEqual(order);
      for (const letter of browsed) {
        expectDeadLetter(letter, {
          id: letter.message.id,
          body: bodyOf.get(letter.message.id),
          reason: "rejected",
          attempts: 1,
          lastError: "conformance: bad record",
        });
      }
      const again = await provider.admin.browseDeadLetters(source, { offset: 0, limit: 10 });
      expect(again.total, "browsing removes nothing").toBe(5);
      // Back to back, a browse must see everything the previous one put back: a browse that hands its
      // messages back lazily would show a dead-letter queue as briefly empty.
      for (let round = 0; round < 20; round++) {
        const page = await provider.admin.browseDeadLetters(source, { offset: 0, limit: 10 });
        expect([page.total, page.items.length], `browse round ${round}: total and items`).toEqual([5, 5]);
      }
      await expectDlqDepth(h, provider, queue, 5);

      const [discardId, redriveId, ...rest] = order as [string, string, ...string[]];
      expect(await provider.admin.discardOne(source, discardId), "discardOne of a dead letter").toEqual({
        discarded: true,
      });
      expect(await provider.admin.discardOne(source, discardId), "discarding twice finds nothing").toEqual({
        discarded: false,
      });
      expect(
        await provider.admin.discardOne(source, "no-such-message"),
        "discardOne of an unknown id",
      ).toEqual({ discarded: false });
      expect((await provider.admin.browseDeadLetters(source, { offset: 0, limit: 10 })).total).toBe(4);

      const consumer = collectDeliveries();
      await h.subscribe(provider, queue, consumer.handler, { subscription: "consumer" });
      expect(await provider.admin.redriveOne(source, redriveId), "redriveOne of a dead letter").toEqual({
        redriven: true,
      });
      await consumer.waitForIds([redriveId], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs,
      });
      expect(await provider.admin.redriveOne(source, redriveId), "redriving twice finds nothing").toEqual({
        redriven: false,
      });
      const afterOne = await provider.admin.browseDeadLetters(source, { offset: 0, limit: 10 });
      expect(afterOne.items.map((l) => l.message.id)).toEqual(rest);

      expect(await provider.admin.redriveAll(source), "redriveAll reports exactly the 3 left").toEqual({
        redriven: 3,
      });
      await consumer.waitForIds(rest, { status: "ACKNOWLEDGED", timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      expect(consumer.deliveries.length, "each redriven message delivered once").toBe(4);
      for (const d of consumer.deliveries) {
        expect(d.body).toEqual(bodyOf.get(d.id));
        expect(d.attempt, "a redriven message starts a fresh attempt budget").toBe(1);
      }
      expect(consumer.count(discardId), "a discarded message is gone for good").toBe(0);
      expect(await provider.admin.redriveAll(source), "redriveAll of an empty DLQ").toEqual({ redriven: 0 });
      await expectDlqDepth(h, provider, queue, 0);
    },
  });

  defineTest(env, "dead-letters", {
    title:
      "a dead letter deep in a large dead-letter queue (past a broker's 200-message management page) is found, discarded and redriven",
    // 250 letters dead-lettered and read whole by each admin call: seconds on a broker with slow confirms.
    timeoutMs: 120_000,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("dlq-deep");
      const source = { destination: queue };
      const rejecter = collectDeliveries(() => ({ status: "REJECTED", reason: "conformance: deep" }));
      const subscription = await h.subscribe(provider, queue, rejecter.handler, { subscription: "rejecter" });
      // 50 publishes at a time: one after the other takes seconds on a broker with slow confirms.
      for (let start = 0; start < DEEP_LETTERS; start += 50)
        await Promise.all(range(50).map((n) => provider.publish(queue, { body: { n: start + n } })));
      await h.deadLettersUntil(provider, source, DEEP_LETTERS, 60_000);
      await subscription.unsubscribe();
      const order = rejecter.deliveries.map((d) => d.id);
      const discardId = order[DEEP_LETTERS - 20] as string;
      const redriveId = order[DEEP_LETTERS - 10] as string;

      expect(await provider.admin.discardOne(source, discardId), "discardOne of a deep dead letter").toEqual({
        discarded: true,
      });
      expect(await provider.admin.discardOne(source, discardId), "it is gone").toEqual({ discarded: false });
      const consumer = collectDeliveries();
      await h.subscribe(provider, queue, consumer.handler, { subscription: "consumer" });
      expect(await provider.admin.redriveOne(source, redriveId), "redriveOne of a deep dead letter").toEqual({
        redriven: true,
      });
      await consumer.waitForIds([redriveId], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs,
      });
      expect(await provider.admin.redriveOne(source, redriveId), "it is gone").toEqual({ redriven: false });

      const left = order.filter((id) => id !== discardId && id !== redriveId);
      const page = await provider.admin.browseDeadLetters(source, { offset: DEEP_LETTERS - 30, limit: 20 });
      expect([page.total, page.items.map((l) => l.message.id)], "a deep page, in dead-letter order").toEqual([
        left.length,
        left.slice(DEEP_LETTERS - 30, DEEP_LETTERS - 10),
      ]);
      await expectDlqDepth(h, provider, queue, left.length);
      await h.quiet();
      expect(
        consumer.deliveries.map((d) => d.id),
        "only the redriven letter was delivered",
      ).toEqual([redriveId]);
    },
  });

  defineTest(env, "dead-letters", {
    title:
      "a dead letter stored twice (a confirmation lost in a cut) counts, lists, redrives and discards once",
    notRunWhen: (_caps, suite) =>
      suite.options.storeDeadLetterAgain === undefined
        ? "the provider stores a dead letter in the same step as it settles the original, so never twice (no storeDeadLetterAgain)"
        : undefined,
    body: async (h) => {
      const storeAgain = h.env.options.storeDeadLetterAgain;
      if (storeAgain === undefined) return;
      const provider = await h.provider();
      const queue = h.queue("dlq-twice");
      const source = { destination: queue };
      const rejecter = collectDeliveries(() => ({ status: "REJECTED", reason: "conformance: stored twice" }));
      const subscription = await h.subscribe(provider, queue, rejecter.handler, { subscription: "rejecter" });
      const bodies = range(4).map((n) => ({ n }));
      const ids = await publishAll(provider, queue, bodies);
      await h.deadLettersUntil(provider, source, 4);
      await subscription.unsubscribe();
      const order = rejecter.deliveries.map((d) => d.id);
      const [a, b, c, d] = order as [string, string, string, string];

      await storeAgain(source, a);
      await expectDlqDepth(h, provider, queue, 4);
      const listed = await h.allDeadLetters(provider, source);
      expect(
        listed.map((l) => l.message.id),
        "each dead letter listed once, in dead-letter order",
      ).toEqual(order);
      const second = await provider.admin.browseDeadLetters(source, { offset: 1, limit: 2 });
      expect(
        [second.total, second.items.map((l) => l.message.id)],
        "a page past the twice-stored one",
      ).toEqual([4, [b, c]]);

      await storeAgain(source, b);
      expect(await provider.admin.discardOne(source, b), "discardOne of a dead letter stored twice").toEqual({
        discarded: true,
      });
      expect(await provider.admin.discardOne(source, b), "no copy of it is left").toEqual({
        discarded: false,
      });

      const consumer = collectDeliveries();
      await h.subscribe(provider, queue, consumer.handler, { subscription: "consumer" });
      await storeAgain(source, c);
      expect(await provider.admin.redriveOne(source, c), "redriveOne of a dead letter stored twice").toEqual({
        redriven: true,
      });
      await consumer.waitForIds([c], { status: "ACKNOWLEDGED", timeoutMs: h.timing.deliveryTimeoutMs });
      expect(await provider.admin.redriveOne(source, c), "no copy of it is left").toEqual({
        redriven: false,
      });

      await storeAgain(source, d);
      expect(await provider.admin.redriveAll(source), "redriveAll republishes each dead letter once").toEqual(
        {
          redriven: 2,
        },
      );
      await consumer.waitForIds([a, d], { status: "ACKNOWLEDGED", timeoutMs: h.timing.deliveryTimeoutMs });
      await h.quiet();
      expect(
        [...consumer.deliveries.map((delivery) => delivery.id)].sort(),
        "each redriven message delivered once",
      ).toEqual([a, c, d].sort());
      expect(consumer.count(b), "a discarded message is gone for good").toBe(0);
      expect(ids.sort()).toEqual([...order].sort());
      await expectDlqDepth(h, provider, queue, 0);
    },
  });
}
