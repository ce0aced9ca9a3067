import { describe, expect, it } from "vitest";
import { escapeName, escapeSubscription, resolveDestination, routeOf } from "../src/index.js";

describe("naming", () => {
  it("maps queues and topics to persistent topic names with a kind prefix", () => {
    expect(resolveDestination("/queue/orders/new").topic).toBe("q.orders.new");
    expect(resolveDestination("/topic/config.reloaded").topic).toBe("t.config_2ereloaded");
  });

  it("keeps names that differ only in separators apart", () => {
    const names = ["a/b", "a.b", "a_b", "a-b", "a:b", "A/B", "a__b", "a_2eb"];
    const escaped = names.map(escapeName);
    expect(new Set(escaped).size).toBe(names.length);
    for (const name of escaped) expect(name).toMatch(/^[A-Za-z0-9._-]+$/);
  });

  it("never produces the provider's own suffixes or Pulsar's reserved -partition-", () => {
    expect(escapeName("x-dlq")).toBe("x_2ddlq");
    expect(escapeName("x-retry")).toBe("x_2dretry");
    expect(escapeName("a-partition-1")).toBe("a_2dpartition-1");
    const queue = routeOf("/queue/x", "any");
    expect(queue.deadLetterTopic).toBe("q.x-dlq");
    expect(resolveDestination("/queue/x-dlq").topic).not.toBe(queue.deadLetterTopic);
  });

  it("gives a queue one shared subscription and its own topic for retries", () => {
    const a = routeOf("/queue/jobs", "worker-a");
    const b = routeOf("/queue/jobs", "worker-b");
    expect(a.pulsarSubscription).toBe("factflow");
    expect(b.pulsarSubscription).toBe("factflow");
    expect(a.retryTopic).toBe(a.topic);
  });

  it("gives each topic subscription its own retry and dead-letter topics", () => {
    const route = routeOf("/topic/events", "audit-log");
    expect(route.pulsarSubscription).toBe(escapeSubscription("audit-log"));
    expect(route.pulsarSubscription).not.toContain("-");
    expect(route.retryTopic).toBe(`t.events--${route.pulsarSubscription}-retry`);
    expect(route.deadLetterTopic).toBe(`t.events--${route.pulsarSubscription}-dlq`);
    // A topic whose name ends in "-" cannot be confused with the separator.
    expect(routeOf("/topic/events-", "x").deadLetterTopic).not.toBe(
      routeOf("/topic/events", "-x").deadLetterTopic,
    );
  });

  it("refuses invalid destinations with invalid_destination", () => {
    expect(() => resolveDestination("orders")).toThrow(
      expect.objectContaining({ code: "invalid_destination" }),
    );
  });
});
