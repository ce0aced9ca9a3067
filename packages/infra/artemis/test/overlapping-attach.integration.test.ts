import { waitFor } from "@factflow/infra-testkit";
import type { Delivery, HandlerResult } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { createArtemisProvider } from "../src/index.js";
import { ARTEMIS_URL, artemisAvailability, runPrefix } from "./helpers.js";

// Two consumer replacements of one subscription that overlap (a route restart while another one, or
// a reconnect's re-attach, is still waiting for the broker): the one that loses must be unsubscribed.
// Left attached, it keeps taking deliveries the provider ignores, and the broker holds them for it
// for ever (messages stuck as delivering, executions that never end).

const available = await artemisAvailability();
const required = process.env.FACTFLOW_REQUIRE_SERVICES === "1";
const prefix = runPrefix("overlap");
if (!available.ok) console.warn(`[factflow/artemis] overlapping attach test not run: ${available.reason}`);

describe.skipIf(!available.ok && !required)("overlapping consumer replacements (real Artemis)", () => {
  const p = createArtemisProvider({ url: ARTEMIS_URL, heartbeatMs: 2_000, reconnectDelayMs: 100 });
  const destination = `/queue/${prefix}/restarts`;

  afterAll(async () => {
    await p.destroy(destination).catch(() => {});
    await p.close();
  });

  it("keeps one consumer, and every message published afterwards is handled", async () => {
    if (!available.ok) throw new Error(`[factflow/artemis] ${available.reason}`);
    await p.connect();
    const handled = new Set<string>();
    const handler = async (delivery: Delivery): Promise<HandlerResult> => {
      handled.add(delivery.message.id);
      return "ACKNOWLEDGED";
    };
    await p.subscribe(destination, handler, { subscription: "overlap", prefetch: 4, concurrency: 2 });
    const [subscription] = p.subscriptions();
    if (subscription === undefined) throw new Error("no subscription");
    await Promise.all([subscription.restart(), subscription.restart(), subscription.restart()]);

    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await p.publish(destination, { body: { i } })).id);
    await waitFor(() => ids.every((id) => handled.has(id)), {
      timeoutMs: 60_000,
      description: "every message handled by the surviving consumer",
    });
    const stats = await p.admin.stats({ destination });
    expect(stats.consumers).toBe(1);
    expect(stats.depth + stats.inFlight).toBe(0);
  });
});
