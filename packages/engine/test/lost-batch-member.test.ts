import { createEmbeddedProvider } from "@factflow/infra-embedded";
import type { Delivery, MessageHandler } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blocks, forwarding, type Harness, openHarness, seen } from "./harness.js";

/**
 * A batch member whose delivery is lost (its channel closed) after its batch was emitted: the
 * message is in the batch's output, and the broker hands it out again. That copy must wait for the
 * batch's outcome and then be a duplicate, not start a second batch.
 */
describe("a batch member lost after its batch was emitted", () => {
  const inner = createEmbeddedProvider({ mode: "memory" });
  let h: Harness;
  /** The first bat.in delivery (a follower of the batch), and the destination it came from. */
  let first: { delivery: Delivery; lose: AbortController; destination: string } | undefined;
  let copyArrived = false;

  const lossy = forwarding(inner, {
    subscribe(destination, handler: MessageHandler, options) {
      if (!destination.endsWith("/bat.in")) return inner.subscribe(destination, handler, options);
      return inner.subscribe(
        destination,
        async (delivery, signal) => {
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
    blocks.released = false;
    blocks.entered = 0;
    h = await openHarness({ queue: lossy });
  });
  afterAll(async () => {
    blocks.released = true;
    await h?.close();
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
    lost.lose.abort(new Error("channel closed"));
    const message = lost.delivery.message;
    await inner.publish(lost.destination, {
      id: message.id,
      body: message.body,
      headers: { ...message.headers, "x-test-copy": "1" },
    });
    await expect.poll(() => copyArrived).toBe(true);
    blocks.released = true;
    const { id, status, events } = await running;
    expect(status).toBe("completed");
    const batches = (seen.get(id) ?? []).filter((c) => c.route === "bat");
    expect(batches.map((c) => (c.body as { count: number }).count)).toEqual([3]);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["bat.duplicates"]).toBe(1);
    expect(blocks.entered).toBe(1);
  });
});
