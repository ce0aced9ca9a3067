import { createEmbeddedProvider } from "@factflow/infra-embedded";
import type { QueueProtocol } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openHarness, seen } from "./harness.js";

/** One observed call on the provider, in the order it happened. */
interface Step {
  readonly kind: "subscribed" | "publish";
  readonly destination: string;
}

/**
 * A recording proxy over a real provider: it logs when each `subscribe` resolves and when each
 * `publish` is called, and delays every subscription by `subscribeDelayMs` (growing per call) the way
 * a remote broker's round trip would, so an orchestrator that does not await its subscriptions
 * publishes visibly early. Everything else goes straight to the provider.
 */
function recording(inner: QueueProtocol, subscribeDelayMs: number): { queue: QueueProtocol; steps: Step[] } {
  const steps: Step[] = [];
  let calls = 0;
  const queue: QueueProtocol = {
    get name() {
      return inner.name;
    },
    get capabilities() {
      return inner.capabilities;
    },
    get admin() {
      return inner.admin;
    },
    connect: () => inner.connect(),
    close: () => inner.close(),
    counters: () => inner.counters(),
    async publish(destination, message) {
      steps.push({ kind: "publish", destination });
      return inner.publish(destination, message);
    },
    async subscribe(destination, handler, options) {
      calls++;
      await new Promise((r) => setTimeout(r, subscribeDelayMs * calls));
      const subscription = await inner.subscribe(destination, handler, options);
      steps.push({ kind: "subscribed", destination });
      return subscription;
    },
  };
  return { queue, steps };
}

const threeRoutes = `
name: startup-order
init: { route: first, message: { items: [a, b, c] } }
routes:
  first:
    inbound: { queue: first.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [second.in]
  second:
    inbound: { queue: second.in }
    adapters: [{ type: sink }]
    outbound: [third.in]
  third:
    inbound: { queue: third.in }
    adapters: [{ type: sink }]
`;

describe("start-up order", () => {
  let h: Harness;
  let steps: Step[];
  beforeAll(async () => {
    const recorder = recording(createEmbeddedProvider({ mode: "memory" }), 15);
    steps = recorder.steps;
    h = await openHarness({ queue: recorder.queue });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("resolves every route's subscription before the first publish, and the chain completes", async () => {
    const { id, status } = await h.run(threeRoutes);
    expect(status).toBe("completed");
    const mine = steps.filter((s) => s.destination.startsWith(`/queue/${id}/`));
    const firstPublish = mine.findIndex((s) => s.kind === "publish");
    expect(firstPublish).toBeGreaterThan(0);
    const subscribedBefore = mine
      .slice(0, firstPublish)
      .filter((s) => s.kind === "subscribed")
      .map((s) => s.destination)
      .sort();
    expect(subscribedBefore).toEqual(
      ["first.in", "second.in", "third.in"].map((q) => `/queue/${id}/${q}`).sort(),
    );
    // The first publish is the init message to the init route.
    expect(mine[firstPublish]?.destination).toBe(`/queue/${id}/first.in`);
    // The first route fanned out straight to the second, which passed everything on to the third.
    const items = (route: string) =>
      (seen.get(id) ?? [])
        .filter((s) => s.route === route)
        .map((s) => (s.body as { item: string }).item)
        .sort();
    expect(items("second")).toEqual(["a", "b", "c"]);
    expect(items("third")).toEqual(["a", "b", "c"]);
    expect(await h.db.lineage.countOpen(id)).toBe(0);
  });
});
