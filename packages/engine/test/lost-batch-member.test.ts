import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type Delivery, DeliveryLostError, type MessageHandler } from "@factflow/protocols";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { blocks, forwarding, type Harness, openHarness, seen } from "./harness.js";

/**
 * A delivery lost while its handler runs (its channel closed: the provider aborts the handler's
 * signal with a `DeliveryLostError`), and the broker hands the message out again. The handler's work
 * must not be thrown away and redone: it runs to its end, and the redelivery is a duplicate. For a
 * batch member taken into an emitted batch, the message is in that batch's output: the redelivery
 * waits for the batch's outcome and is then a duplicate, not the start of a second batch.
 */
describe("a delivery lost while its handler runs", () => {
  const inner = createEmbeddedProvider({ mode: "memory" });
  let h: Harness;
  /** The first bat.in delivery (a follower of the batch), and the destination it came from. */
  let first: { delivery: Delivery; lose: AbortController; destination: string } | undefined;
  let copyArrived = false;
  /** Deliveries of bat.in handed to the engine, copies included. */
  let batDeliveries = 0;

  /** The publish of the body `3` to bat.in waits for this (see the last test). */
  let thirdHeld: Promise<void> = Promise.resolve();
  let releaseThird = () => {};
  let holdThird = false;

  const lossy = forwarding(inner, {
    async publish(destination, message) {
      if (holdThird && destination.endsWith("/bat.in") && message.body === 3) await thirdHeld;
      return inner.publish(destination, message);
    },
    subscribe(destination, handler: MessageHandler, options) {
      if (!destination.endsWith("/bat.in") && !destination.endsWith("/one.in"))
        return inner.subscribe(destination, handler, options);
      return inner.subscribe(
        destination,
        async (delivery, signal) => {
          if (destination.endsWith("/bat.in")) batDeliveries++;
          if (delivery.message.headers["x-test-copy"] !== undefined) {
            copyArrived = true;
            // Handed out again the way a broker flags a redelivery.
            return handler({ ...delivery, redelivered: true }, signal);
          }
          if (first !== undefined) return handler(delivery, signal);
          const lose = new AbortController();
          signal.addEventListener("abort", () => lose.abort(signal.reason), { once: true });
          first = { delivery, lose, destination };
          await handler(delivery, lose.signal);
          // Lost: whatever the handler says cannot settle it; the test's copy stands in for it.
          return "ACKNOWLEDGED";
        },
        options,
      );
    },
  });

  beforeAll(async () => {
    h = await openHarness({ queue: lossy });
  });
  afterAll(async () => {
    blocks.released = true;
    releaseThird();
    await h?.close();
  });

  /** Hands the first delivery's message out again, flagged as a redelivery (waits for it to arrive). */
  async function redeliver(waitForIt = true): Promise<void> {
    const { delivery, destination } = first as NonNullable<typeof first>;
    const message = delivery.message;
    await inner.publish(destination, {
      id: message.id,
      body: message.body,
      headers: { ...message.headers, "x-test-copy": "1" },
    });
    if (waitForIt) await expect.poll(() => copyArrived).toBe(true);
  }

  beforeEach(() => {
    blocks.released = false;
    blocks.entered = 0;
    first = undefined;
    copyArrived = false;
    batDeliveries = 0;
    holdThird = false;
    thirdHeld = new Promise<void>((resolve) => {
      releaseThird = resolve;
    });
  });

  const single = (name: string, concurrency: number) => `
name: ${name}
init: { route: one, message: { n: 1 } }
routes:
  one:
    inbound: { queue: one.in, concurrency: ${concurrency} }
    adapters: [{ type: block }, { type: sink }]
`;

  it("lets the handler finish, and acknowledges a later redelivery as a duplicate", async () => {
    // One handler at a time: the redelivery waits in the broker until the lost run has finished.
    const running = h.run(single("lost-finishes", 1));
    await expect.poll(() => blocks.entered).toBe(1);
    const lost = first as NonNullable<typeof first>;
    lost.lose.abort(new DeliveryLostError(lost.destination));
    await redeliver(false);
    blocks.released = true;
    await expect.poll(() => copyArrived).toBe(true);
    const { id, status, events } = await running;
    expect(status).toBe("completed");
    expect((seen.get(id) ?? []).filter((c) => c.route === "one")).toHaveLength(1);
    expect(blocks.entered).toBe(1);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["one.duplicates"]).toBe(1);
  });

  it("stops the lost delivery's work when the redelivery arrives first, and runs the redelivery", async () => {
    const running = h.run(single("lost-overtaken", 2));
    await expect.poll(() => blocks.entered).toBe(1);
    const lost = first as NonNullable<typeof first>;
    lost.lose.abort(new DeliveryLostError(lost.destination));
    await redeliver();
    await expect.poll(() => blocks.entered).toBe(2);
    blocks.released = true;
    const { id, status } = await running;
    expect(status).toBe("completed");
    // The lost run was stopped in `block`, before its sink: the message reached the sink once.
    expect((seen.get(id) ?? []).filter((c) => c.route === "one")).toHaveLength(1);
  });

  it("acknowledges the message's redelivery as a duplicate once the batch has settled", async () => {
    const running = h.run(`
name: lost-member
init: { route: root, message: { items: [1, 2, 3] } }
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [bat.in]
  bat:
    inbound: { queue: bat.in, concurrency: 4 }
    adapters:
      - { type: batch, config: { size: 3, timeout_ms: 600000 } }
      - { type: block }
      - { type: sink }
`);
    // The batch is emitted and its leader waits in `block`: lose the first member now.
    await expect.poll(() => blocks.entered).toBe(1);
    const lost = first as NonNullable<typeof first>;
    lost.lose.abort(new DeliveryLostError(lost.destination));
    await redeliver();
    blocks.released = true;
    const { id, status, events } = await running;
    expect(status).toBe("completed");
    const batches = (seen.get(id) ?? []).filter((c) => c.route === "bat");
    expect(batches.map((c) => (c.body as { count: number }).count)).toEqual([3]);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["bat.duplicates"]).toBe(1);
    expect(blocks.entered).toBe(1);
  });

  it("takes a member lost before its batch was emitted out of the batch, so its message is emitted once", async () => {
    holdThird = true;
    const running = h.run(`
name: lost-waiting-member
init: { route: root, message: { items: [1, 2, 3] } }
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [bat.in]
  bat:
    inbound: { queue: bat.in, concurrency: 4 }
    adapters:
      - { type: batch, config: { size: 3, timeout_ms: 600000 } }
      - { type: sink }
`);
    // The first two messages wait in the batch (2 of 3); the first one's delivery is lost.
    await expect.poll(() => batDeliveries).toBe(2);
    const lost = first as NonNullable<typeof first>;
    lost.lose.abort(new DeliveryLostError(lost.destination));
    // The third message fills the batch before the lost one is handed out again: the batch must not
    // carry the lost one's message, which its redelivery brings back.
    releaseThird();
    await redeliver();
    const { id, status } = await running;
    expect(status).toBe("completed");
    const batches = (seen.get(id) ?? []).filter((c) => c.route === "bat");
    const items = batches.flatMap((c) => (c.body as { items: number[] }).items);
    expect(items.sort()).toEqual([1, 2, 3]);
  });
});
