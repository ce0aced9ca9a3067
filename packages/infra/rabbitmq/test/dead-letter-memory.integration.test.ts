import { retainedBodies } from "@factflow/infra-testkit";
import { Headers } from "@factflow/protocols";
import amqp from "amqplib";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { observeDeadLetterReads, REDRIVE_BATCH } from "../src/admin.js";
import { encodeMessage, publishOptions, stringHeaders } from "../src/envelope-codec.js";
import { createRabbitMqProvider, type RabbitMqProvider } from "../src/index.js";
import { resolveDestination } from "../src/naming.js";
import {
  brokerUnavailable,
  deadLetterQueueOf,
  deleteTopology,
  RABBITMQ_URL,
  uniquePrefix,
  waitUntil,
} from "./helpers.js";

// A dead-letter queue far larger than a page, with sizeable bodies and some letters stored twice:
// stats, a browse of one page and a redrive must hold a bounded number of bodies at once (counted
// through the admin's read probe and a forced garbage collection), and the redrive must move every
// letter exactly once.

const skip = await brokerUnavailable();
const prefix = uniquePrefix("dlqmem");
const created: RabbitMqProvider[] = [];
const LETTERS = 3_000;
const BODY_BYTES = 20_000;
/** Every this many letters, one is stored a second time. */
const TWICE_EVERY = 10;
/** Bodies the client library may still reference (the frames of the network read being parsed). */
const IN_TRANSIT = 10;

afterEach(() => observeDeadLetterReads(undefined));
afterAll(async () => {
  if (skip) return;
  for (const p of created) await p.close();
  await deleteTopology({
    queues: created.flatMap((p) => p.declaredNames().queues),
    exchanges: created.flatMap((p) => p.declaredNames().exchanges),
  });
});

async function withChannel<T>(work: (channel: amqp.ConfirmChannel) => Promise<T>): Promise<T> {
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    return await work(await connection.createConfirmChannel());
  } finally {
    await connection.close();
  }
}

describe.skipIf(skip)("dead-letter admin of a large dead-letter queue", () => {
  it("counts, browses a page and redrives with a bounded number of bodies held, each letter once", async () => {
    const p = createRabbitMqProvider({ url: RABBITMQ_URL });
    created.push(p);
    await p.connect();
    const destination = `/queue/${prefix}/big`;
    const source = { destination };
    const dlq = deadLetterQueueOf(source);
    // One letter through the provider, so the dead-letter topology is the provider's own.
    const subscription = await p.subscribe(destination, async () => "REJECTED" as const, {
      subscription: "rejecter",
    });
    const seed = (await p.publish(destination, { body: "seed" })).id;
    await waitUntil(async () => (await p.admin.stats(source)).dlqDepth === 1, 10_000, "the seed dead letter");
    await subscription.unsubscribe();

    const pad = "x".repeat(BODY_BYTES);
    const encoded = Array.from({ length: LETTERS }, (_, i) =>
      encodeMessage(
        destination,
        { body: { i, pad }, headers: { "x-dead-letter-reason": "rejected" } },
        1 << 20,
      ),
    );
    const ids = [seed, ...encoded.map((e) => e.id)];
    const storeTwice = () =>
      withChannel(async (channel) => {
        for (const [i, e] of encoded.entries())
          if (i % TWICE_EVERY === 0) channel.sendToQueue(dlq, e.content, publishOptions(e, false));
        await channel.waitForConfirms();
      });
    await withChannel(async (channel) => {
      for (const [i, e] of encoded.entries()) {
        channel.sendToQueue(dlq, e.content, publishOptions(e, false));
        if (i % 500 === 499) await channel.waitForConfirms();
      }
      await channel.waitForConfirms();
    });
    await storeTwice();
    const storedCount = () => withChannel(async (channel) => (await channel.checkQueue(dlq)).messageCount);
    expect(await storedCount()).toBe(1 + LETTERS + LETTERS / TWICE_EVERY);
    const bodies = retainedBodies(100);
    observeDeadLetterReads((body) => bodies.probe(body));
    bodies.start();

    expect((await p.admin.stats(source)).dlqDepth).toBe(1 + LETTERS);
    const stats = bodies.take();
    expect(stats.read, "stats read every stored copy").toBe(1 + LETTERS + LETTERS / TWICE_EVERY);
    expect(stats.peak, "stats holds a body at a time").toBeLessThanOrEqual(IN_TRANSIT);
    expect(await storedCount(), "the surplus copies left").toBe(1 + LETTERS);

    const offset = 1_500;
    const limit = 50;
    bodies.start();
    const page = await p.admin.browseDeadLetters(source, { offset, limit });
    const browse = bodies.take();
    expect(page.total).toBe(1 + LETTERS);
    expect(page.items.map((letter) => letter.message.id)).toEqual(ids.slice(offset, offset + limit));
    expect(browse.peak, "browse holds one page of bodies").toBeLessThanOrEqual(limit + IN_TRANSIT);

    await storeTwice();
    bodies.start();
    expect((await p.admin.redriveAll(source)).redriven).toBe(1 + LETTERS);
    const redrive = bodies.take();
    expect(redrive.peak, "redrive holds one batch of bodies").toBeLessThanOrEqual(REDRIVE_BATCH + IN_TRANSIT);
    expect(await storedCount(), "the dead-letter queue is empty").toBe(0);

    const target = resolveDestination(destination);
    if (target.kind !== "queue") throw new Error("a queue");
    const redriven = await withChannel(async (channel) => {
      const seen: string[] = [];
      for (;;) {
        const message = await channel.get(target.queue, { noAck: true });
        if (message === false) return seen;
        seen.push(stringHeaders(message)[Headers.messageId] ?? String(message.properties.messageId));
      }
    });
    console.info("bodies read and peak held:", JSON.stringify({ stats, browse, redrive }));
    expect(redriven.length, "each letter redriven once").toBe(1 + LETTERS);
    expect(new Set(redriven)).toEqual(new Set(ids));
  }, 60_000);
});
