import { randomUUID } from "node:crypto";
import { collectDeliveries, waitFor } from "@factflow/infra-testkit";
import type { DeleteDestinationResult } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { createPulsarProvider, type PulsarProvider } from "../src/index.js";
import { pulsarAvailability, urlVia } from "./helpers.js";

// Two provider instances stand for two servers of a cluster on one broker: each runs the queue
// cleanup of an ended execution on its own. `deleteDestination` must not force the other one's
// producer off the topic: the broker's WebSocket proxy would reconnect that producer behind its
// socket, and a socket closed during that reconnect makes the proxy close its shared connection to
// the broker, handing every delivery its consumers hold (any topic, any server) to other consumers
// with a redelivery count of 0, which the engine cannot tell from a fresh delivery.

const available = await pulsarAvailability();
const providers: PulsarProvider[] = [];
const used: string[] = [];

async function connected(): Promise<PulsarProvider> {
  const provider = createPulsarProvider({ url: urlVia(), publishTimeoutMs: 10_000 });
  await provider.connect();
  providers.push(provider);
  return provider;
}

afterAll(async () => {
  const [first] = providers;
  for (const provider of providers) await provider.close();
  if (first === undefined) return;
  const cleaner = createPulsarProvider({ url: urlVia() });
  await cleaner.connect();
  for (const destination of used) await cleaner.destroy(destination).catch(() => {});
  await cleaner.close();
});

/** Deletes once the broker has let go of this instance's own stopped consumer; other answers as they come. */
async function deleteOnceDetached(provider: PulsarProvider, destination: string) {
  let last: DeleteDestinationResult | undefined;
  return waitFor(
    async () => {
      last = await provider.admin.deleteDestination({ destination }, { ifEmpty: true });
      return /consumer\(s\) still attached/.test(last.reason ?? "") ? undefined : last;
    },
    {
      timeoutMs: 15_000,
      intervalMs: 100,
      description: () => `deleting ${destination} (last: ${JSON.stringify(last)})`,
    },
  );
}

describe.skipIf(!available.ok)("pulsar deleteDestination with another client on the topic", () => {
  it("leaves a queue another instance still produces to, and deletes it once that one let go", async () => {
    const cleaner = await connected();
    const publisher = await connected();
    const queue = `/queue/in-use-${randomUUID().slice(0, 8)}`;
    used.push(queue);

    const consumer = collectDeliveries();
    const subscription = await cleaner.subscribe(queue, consumer.handler, { subscription: "in-use" });
    const first = (await publisher.publish(queue, { body: { n: 1 } })).id;
    await consumer.waitForIds([first], { status: "ACKNOWLEDGED" });
    await subscription.unsubscribe();

    const refused = await deleteOnceDetached(cleaner, queue);
    expect(refused, "the other instance's producer is still connected").toMatchObject({ deleted: false });
    expect(refused.reason).toMatch(/still in use: .*connected producers/);

    // The other instance was left alone: its producer still publishes, and the queue still delivers.
    const second = (await publisher.publish(queue, { body: { n: 2 } })).id;
    const again = collectDeliveries();
    const resubscribed = await cleaner.subscribe(queue, again.handler, { subscription: "in-use" });
    await again.waitForIds([second], { status: "ACKNOWLEDGED" });
    await resubscribed.unsubscribe();

    // Its own cleanup closes its producer first; the topic goes once nothing uses it.
    const deleted = await deleteOnceDetached(publisher, queue);
    expect(deleted).toMatchObject({ deleted: true });
    const gone = await cleaner.admin.deleteDestination({ destination: queue });
    expect(gone.deleted, "the topic is gone and stays gone").toBe(false);
    expect(gone.reason).toMatch(/does not exist/);
  });

  it("lets go of its own producer even when it refuses, so the last instance to clean up deletes", async () => {
    const early = await connected();
    const late = await connected();
    const queue = `/queue/in-use-${randomUUID().slice(0, 8)}`;
    used.push(queue);

    // `early` published (it holds a producer); `late` still consumes when `early` cleans up.
    const consumer = collectDeliveries();
    const subscription = await late.subscribe(queue, consumer.handler, { subscription: "in-use" });
    const id = (await early.publish(queue, { body: { n: 1 } })).id;
    await consumer.waitForIds([id], { status: "ACKNOWLEDGED" });
    const refused = await early.admin.deleteDestination({ destination: queue }, { ifEmpty: true });
    expect(refused).toMatchObject({
      deleted: false,
      reason: expect.stringMatching(/consumer\(s\) still attached/),
    });

    await subscription.unsubscribe();
    const deleted = await deleteOnceDetached(late, queue);
    expect(deleted, "nothing of `early` is left on the topic").toMatchObject({ deleted: true });
  });
});
