import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { evaluatePredicate, overrideInbound, PipelineConfigSchema } from "../src/index.js";

const base = {
  name: "q",
  init: { route: "a" },
  routes: {
    a: { inbound: { queue: "a.in" }, adapters: [{ type: "passthrough" }] },
    b: { inbound: { queue: "b.in", concurrency: 4 }, adapters: [{ type: "passthrough" }] },
  },
};

describe("queues: definitions", () => {
  it("fill a route's settings from the definition of its queue; the route's own values win", () => {
    const parsed = v.parse(PipelineConfigSchema, {
      ...base,
      queues: {
        "a.in": {
          concurrency: 6,
          group_by: { field: "customer.id" },
          timeout_ms: 5000,
          retry: { max_attempts: 7 },
        },
        "b.in": { concurrency: 9, priority: { max: 5, from: { header: "x-urgency" } }, dead_letter: false },
      },
    });
    expect(parsed.routes.a?.inbound).toEqual({
      queue: "a.in",
      concurrency: 6,
      prefetch: 10,
      ordering: "fifo",
      group_by: { field: "customer.id" },
      timeout_ms: 5000,
      dead_letter: true,
    });
    expect(parsed.routes.a?.retry?.max_attempts).toBe(7);
    expect(parsed.routes.b?.inbound).toMatchObject({
      concurrency: 4,
      priority: { max: 5, from: { header: "x-urgency" } },
      dead_letter: false,
      ordering: "none",
    });
  });

  it("accept concurrency 0 (paused) and default the priority source to the adapter", () => {
    const parsed = v.parse(PipelineConfigSchema, {
      ...base,
      queues: { "a.in": { concurrency: 0, priority: { max: 3 } } },
    });
    expect(parsed.routes.a?.inbound.concurrency).toBe(0);
    expect(parsed.routes.a?.inbound.priority).toEqual({ max: 3, from: "adapter" });
  });

  it("refuse malformed settings with their path", () => {
    const result = v.safeParse(PipelineConfigSchema, {
      ...base,
      queues: { "a.in": { priority: { max: 11 }, group_by: { field: "a..b" }, colour: "red" } },
    });
    expect(result.success).toBe(false);
    const paths = (result.issues ?? []).map((i) => v.getDotPath(i));
    expect(paths).toEqual(expect.arrayContaining(["queues.a.in.priority.max", "queues.a.in.colour"]));
  });

  it("are laid over a parsed route by an operator's definition, which wins", () => {
    const parsed = v.parse(PipelineConfigSchema, base);
    const inbound = overrideInbound(parsed.routes.b!.inbound, { concurrency: 20 });
    expect(inbound).toMatchObject({ queue: "b.in", concurrency: 20, prefetch: 20 });
    expect(overrideInbound(parsed.routes.b!.inbound, { concurrency: 0 }).concurrency).toBe(0);
  });
});

describe("conditions", () => {
  it("parse a predicate or an adapter, and refuse two operators", () => {
    const route = (condition: unknown) =>
      v.safeParse(PipelineConfigSchema, {
        ...base,
        routes: { a: { inbound: { queue: "a.in" }, condition, adapters: [{ type: "passthrough" }] } },
      }).success;
    expect(route({ field: "kind", equals: "order" })).toBe(true);
    expect(route({ header: "x-kind", in: ["a", "b"] })).toBe(true);
    expect(route({ adapter: "is_ready" })).toBe(true);
    expect(route({ field: "kind", equals: "a", exists: true })).toBe(false);
    expect(route({ field: "kind", header: "x", exists: true })).toBe(false);
  });

  it("evaluate on payload paths and headers", () => {
    const body = { order: { kind: "refund", total: 3 } };
    const headers = { "x-tenant": "t1" };
    expect(evaluatePredicate({ field: "order.kind", equals: "refund" }, body, headers)).toBe(true);
    expect(evaluatePredicate({ field: "order.total", not_equals: 3 }, body, headers)).toBe(false);
    expect(evaluatePredicate({ field: "order.missing", exists: false }, body, headers)).toBe(true);
    expect(evaluatePredicate({ header: "x-tenant", in: ["t1", "t2"] }, body, headers)).toBe(true);
  });
});
