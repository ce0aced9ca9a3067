import { MessageStatus } from "@factflow/protocols";
import { GROUP_LANE_WINDOW, groupedSubscription, resolveSubscribeOptions } from "@factflow/provider-kit";
import { describe, expect, it } from "vitest";
import { planConsumption } from "../src/ordered-plan.js";
import { PULSAR_CAPABILITIES } from "../src/provider.js";

const handler = () => MessageStatus.ACKNOWLEDGED;
const resolve = (options: Parameters<typeof resolveSubscribeOptions>[0]) =>
  resolveSubscribeOptions(options, PULSAR_CAPABILITIES);

describe("planConsumption", () => {
  it("keeps a subscription without ordering on a Shared subscription, as given", () => {
    const options = resolve({ subscription: "s", prefetch: 20, concurrency: 5 });
    const plan = planConsumption(handler, options);
    expect(plan.subscriptionType).toBe("Shared");
    expect(plan.handler).toBe(handler);
    expect(plan.options).toBe(options);
  });

  it("consumes a grouped subscription (already in the kit's lanes) through a Failover subscription", () => {
    const grouped = groupedSubscription(
      handler,
      resolve({ subscription: "s", ordering: "fifo", groupBy: "customer.id", concurrency: 4, prefetch: 8 }),
    );
    const plan = planConsumption(grouped.handler, grouped.options);
    expect(plan.subscriptionType).toBe("Failover");
    expect(plan.handler).toBe(grouped.handler);
    expect(plan.options.prefetch).toBeGreaterThanOrEqual(GROUP_LANE_WINDOW);
  });

  it("runs FIFO alone as one lane on a Failover subscription, retrying in place", () => {
    const options = resolve({ subscription: "s", ordering: "fifo", retry: { maxAttempts: 4 } });
    const plan = planConsumption(handler, options);
    expect(plan.subscriptionType).toBe("Failover");
    expect(plan.handler).not.toBe(handler);
    // The broker is never asked to retry: the lane does, with the caller's budget.
    expect(plan.options.retry.maxAttempts).toBe(1);
    // The lane keeps the order, so the subscription hands it a whole window, not one at a time.
    expect(plan.options.prefetch).toBeGreaterThanOrEqual(GROUP_LANE_WINDOW);
    expect(plan.options.ordering).toBe("none");
  });

  it("declares ordered groups, and still no priorities", () => {
    expect(PULSAR_CAPABILITIES).toMatchObject({
      fifo: true,
      messageGroups: true,
      orderedGroups: true,
      priorities: false,
    });
  });
});
