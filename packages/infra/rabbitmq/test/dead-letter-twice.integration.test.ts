import type { Delivery, HandlerResult } from "@factflow/protocols";
import amqp from "amqplib";
import { afterAll, describe, expect, it } from "vitest";
import { createRabbitMqProvider, type RabbitMqProvider } from "../src/index.js";
import {
  brokerUnavailable,
  deadLetterQueueOf,
  deleteTopology,
  RABBITMQ_URL,
  storeDeadLetterAgain,
  uniquePrefix,
  waitUntil,
} from "./helpers.js";

// A publisher confirm lost in a connection cut leaves a dead letter stored twice: the copy is sent
// again, or the original comes back and is dead-lettered again. Both copies carry the same message
// id and publish time. These tests store such a second copy directly and check that the admin API
// counts, lists, redrives and discards the dead letter once, and removes the surplus copy.

const skip = await brokerUnavailable();
const prefix = uniquePrefix("dlq2");
const created: RabbitMqProvider[] = [];

afterAll(async () => {
  if (skip) return;
  for (const p of created) await p.close();
  await deleteTopology({
    queues: created.flatMap((p) => p.declaredNames().queues),
    exchanges: created.flatMap((p) => p.declaredNames().exchanges),
  });
});

async function connected(): Promise<RabbitMqProvider> {
  const p = createRabbitMqProvider({ url: RABBITMQ_URL });
  created.push(p);
  await p.connect();
  return p;
}

async function stored(queue: string): Promise<number> {
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    const channel = await connection.createChannel();
    return (await channel.checkQueue(queue)).messageCount;
  } finally {
    await connection.close();
  }
}

function recorder(respond: (d: Delivery) => HandlerResult) {
  const seen: Delivery[] = [];
  return {
    seen,
    handler: async (d: Delivery) => {
      seen.push(d);
      return respond(d);
    },
  };
}

describe.skipIf(skip)("a dead letter stored twice", () => {
  it("is counted, listed, redriven and discarded once, and its surplus copy leaves the broker", async () => {
    const p = await connected();
    const destination = `/queue/${prefix}/twice`;
    const source = { destination };
    const dlq = deadLetterQueueOf(source);
    const rejecter = recorder(() => "REJECTED");
    const subscription = await p.subscribe(destination, rejecter.handler, { subscription: "rejecter" });
    const [a, b, c] = [
      (await p.publish(destination, { body: "a" })).id,
      (await p.publish(destination, { body: "b" })).id,
      (await p.publish(destination, { body: "c" })).id,
    ];
    await waitUntil(async () => (await p.admin.stats(source)).dlqDepth === 3, 10_000, "three dead letters");
    await subscription.unsubscribe();

    await storeDeadLetterAgain(source, a);
    expect(await stored(dlq), "the broker holds the copy twice").toBe(4);
    expect((await p.admin.stats(source)).dlqDepth, "dlqDepth counts it once").toBe(3);
    expect(await stored(dlq), "the surplus copy is removed").toBe(3);

    await storeDeadLetterAgain(source, b);
    const page = await p.admin.browseDeadLetters(source, { offset: 0, limit: 10 });
    expect(page.total).toBe(3);
    expect(page.items.map((l) => l.message.id)).toEqual([a, b, c]);
    const second = await p.admin.browseDeadLetters(source, { offset: 1, limit: 1 });
    expect([second.total, second.items.map((l) => l.message.id)]).toEqual([3, [b]]);
    expect(await stored(dlq)).toBe(3);

    await storeDeadLetterAgain(source, c);
    expect(await p.admin.discardOne(source, c)).toEqual({ discarded: true });
    expect(await p.admin.discardOne(source, c), "no copy of it is left").toEqual({ discarded: false });

    await storeDeadLetterAgain(source, a);
    expect(await p.admin.redriveOne(source, a)).toEqual({ redriven: true });
    expect(await p.admin.redriveOne(source, a), "no copy of it is left").toEqual({ redriven: false });
    await storeDeadLetterAgain(source, b);
    expect(await p.admin.redriveAll(source), "one republish per dead letter").toEqual({ redriven: 1 });
    expect(await stored(dlq)).toBe(0);

    const consumer = recorder(() => "ACKNOWLEDGED");
    await p.subscribe(destination, consumer.handler, { subscription: "consumer" });
    await waitUntil(() => consumer.seen.length >= 2, 10_000, "the redriven messages");
    // A third delivery would arrive right behind the two: one more redrive round trip settles it.
    await p.publish(destination, { body: "marker" });
    await waitUntil(() => consumer.seen.length >= 3, 10_000, "the marker");
    expect(consumer.seen.map((d) => d.message.body)).toEqual(["a", "b", "marker"]);
  });

  it("a redriven message that fails again is one dead letter, with its new failure", async () => {
    const p = await connected();
    const destination = `/queue/${prefix}/again`;
    const source = { destination };
    let failures = 0;
    const rejecter = recorder(() => {
      failures += 1;
      return { status: "REJECTED", reason: `failure ${failures}` };
    });
    await p.subscribe(destination, rejecter.handler, { subscription: "rejecter" });
    const { id } = await p.publish(destination, { body: "again" });
    await waitUntil(async () => (await p.admin.stats(source)).dlqDepth === 1, 10_000, "the dead letter");
    expect(await p.admin.redriveOne(source, id)).toEqual({ redriven: true });
    await waitUntil(() => rejecter.seen.length === 2, 10_000, "the second failure");
    await waitUntil(async () => (await p.admin.stats(source)).dlqDepth === 1, 10_000, "the new dead letter");
    const page = await p.admin.browseDeadLetters(source, { offset: 0, limit: 10 });
    expect(page.total).toBe(1);
    expect(page.items.map((l) => [l.message.id, l.lastError])).toEqual([[id, "failure 2"]]);
  });
});
