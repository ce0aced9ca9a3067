import { randomUUID } from "node:crypto";
import { collectDeliveries, waitFor } from "@factflow/infra-testkit";
import { afterAll, describe, expect, it } from "vitest";
import { createPulsarProvider, type PulsarProvider } from "../src/index.js";
import { pulsarAvailability, urlVia } from "./helpers.js";

// The conformance suite checks purge of waiting messages on every provider; this file checks what is
// particular to Pulsar's skip-all: a delivery a consumer holds is not counted and is still settled,
// and a topic subscription's retry topic is cleared with it.

const available = await pulsarAvailability();
const used: string[] = [];
let provider: PulsarProvider | undefined;

async function connected(): Promise<PulsarProvider> {
  if (provider !== undefined) return provider;
  provider = createPulsarProvider({ url: urlVia(), publishTimeoutMs: 10_000 });
  await provider.connect();
  return provider;
}

afterAll(async () => {
  if (provider === undefined) return;
  for (const destination of used) await provider.destroy(destination).catch(() => {});
  await provider.close();
});

function name(kind: "queue" | "topic"): string {
  const destination = `/${kind}/purge-${randomUUID().slice(0, 8)}`;
  used.push(destination);
  return destination;
}

describe.skipIf(!available.ok)("pulsar purgeDestination", () => {
  it("keeps the delivery a consumer holds out of the count and lets it settle", async () => {
    const p = await connected();
    const queue = name("queue");
    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const consumer = collectDeliveries(async (): Promise<"ACKNOWLEDGED"> => {
      await held;
      return "ACKNOWLEDGED";
    });
    await p.subscribe(queue, consumer.handler, { subscription: "purge", prefetch: 1, concurrency: 1 });
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await p.publish(queue, { body: { n } })).id);
    await consumer.waitForCount(1);
    await waitFor(async () => (await p.admin.stats({ destination: queue })).depth === 2, {
      description: "2 waiting, 1 held",
    });

    const purged = await p.admin.purgeDestination?.({ destination: queue });
    release?.();
    await consumer.waitForIds([ids[0] as string], { status: "ACKNOWLEDGED" });
    await waitFor(async () => (await p.admin.stats({ destination: queue })).depth === 0, {
      description: "nothing waiting",
    });
    const [after] = [(await p.publish(queue, { body: { n: 4 } })).id];
    await consumer.waitForIds([after as string], { status: "ACKNOWLEDGED" });
    // What the purge removed never comes; what consumers held (the running delivery, and what the
    // broker had already handed towards it) is handled.
    const handled = consumer.ids().filter((id) => id !== after);
    expect(handled[0]).toBe(ids[0]);
    expect(purged).toEqual({ purged: 3 - handled.length });
    expect(purged?.purged, "at least one waiting message purged").toBeGreaterThan(0);
    expect(consumer.ids().at(-1)).toBe(after);
  });

  it("clears a topic subscription's retry topic with it and keeps its dead letters", async () => {
    const p = await connected();
    const topic = name("topic");
    const source = { destination: topic, subscription: "audit" };
    const rejecting = collectDeliveries(() => "REJECTED");
    const sub = await p.subscribe(topic, rejecting.handler, { subscription: "audit" });
    const rejected: string[] = [];
    for (const n of [1, 2]) rejected.push((await p.publish(topic, { body: { n } })).id);
    await rejecting.waitForIds(rejected, { status: "REJECTED" });
    await waitFor(async () => (await p.admin.stats(source)).dlqDepth === 2, {
      description: "2 dead letters",
    });
    await sub.unsubscribe();
    // A redriven dead letter waits on the subscription's retry topic, a new message on the topic.
    expect(await p.admin.redriveOne(source, rejected[0] as string)).toEqual({ redriven: true });
    await p.publish(topic, { body: { n: 3 } });
    await waitFor(async () => (await p.admin.stats(source)).depth === 2, { description: "2 waiting" });

    expect(await p.admin.purgeDestination?.(source)).toEqual({ purged: 2 });
    await waitFor(async () => (await p.admin.stats(source)).depth === 0, { description: "0 waiting" });
    expect((await p.admin.stats(source)).dlqDepth, "the other dead letter stays").toBe(1);
    const unknown = await p.admin.purgeDestination?.({ destination: topic, subscription: "nobody" });
    expect(unknown?.purged).toBe(0);
    expect(unknown?.reason).toMatch(/does not exist/);
  });

  it("drops a queue's scheduled retry: it waits, delayed, in the queue's own topic", async () => {
    const p = await connected();
    const queue = name("queue");
    const consumer = collectDeliveries((_delivery, _signal, previous) =>
      previous === 0 ? "FAILED" : "ACKNOWLEDGED",
    );
    await p.subscribe(queue, consumer.handler, {
      subscription: "purge",
      retry: { maxAttempts: 3, initialDelayMs: 1_000, multiplier: 1, maxDelayMs: 1_000 },
    });
    const [failed] = [(await p.publish(queue, { body: { n: 1 } })).id];
    await consumer.waitForIds([failed as string], { status: "FAILED" });
    await waitFor(async () => (await p.admin.stats({ destination: queue })).depth === 1, {
      description: "the retry copy scheduled",
    });
    expect(await p.admin.purgeDestination?.({ destination: queue })).toEqual({ purged: 1 });
    // A marker due after the retry would have been: once it is handled, the retry would have come.
    const [marker] = [(await p.publish(queue, { body: { n: 2 }, delayMs: 1_500 })).id];
    await consumer.waitForIds([marker as string], { status: "ACKNOWLEDGED" });
    expect(consumer.count(failed as string), "the scheduled retry was purged").toBe(1);
  });
});
