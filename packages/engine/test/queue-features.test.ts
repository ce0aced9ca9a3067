import { createEmbeddedProvider } from "@factflow/infra-embedded";
import type { AdapterDefinition } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../src/index.js";
import { forwarding, type Harness, openHarness, waitFor } from "./harness.js";

const KEYS = 50;
const MESSAGES = 1000;

/** What `orders_sink` saw, per execution: key, seq and attempt in the order handlers finished. */
const handled = new Map<string, { key: string; seq: number; attempt: number; ok: boolean; at: number }[]>();
/** The order `orders.in` messages were handed to the broker, per key (ids). */
const published = new Map<string, string[]>();
let clock = 0;
/** Priorities of messages published, per scoped destination. */
const priorities = new Map<string, (number | undefined)[]>();

const adapters: AdapterDefinition[] = [
  {
    type: "emit_orders",
    description: "fans out MESSAGES orders over KEYS keys; every tenth fails once",
    create: () => ({
      type: "emit_orders",
      process: () => ({
        data: null,
        emitMessages: Array.from({ length: MESSAGES }, (_, i) => ({
          body: { order: { key: `k${i % KEYS}` }, seq: Math.floor(i / KEYS), fails: i % 10 === 3 },
        })),
      }),
    }),
  },
  {
    type: "orders_sink",
    description: "fails a message marked `fails` on its first attempt, records the rest",
    create: () => ({
      type: "orders_sink",
      async process(ctx) {
        const body = ctx.message as { order: { key: string }; seq: number; fails: boolean };
        await new Promise((r) => setTimeout(r, 1));
        const ok = !(body.fails && ctx.attempt === 1);
        const list = handled.get(ctx.executionId) ?? [];
        list.push({ key: body.order.key, seq: body.seq, attempt: ctx.attempt, ok, at: clock++ });
        handled.set(ctx.executionId, list);
        return ok ? { data: null } : { data: null, error: "fails once", retryable: true };
      },
    }),
  },
  {
    type: "count_to",
    description: "fans out `n` messages numbered from 0",
    create: (config) => ({
      type: "count_to",
      process: () => ({
        data: null,
        emitMessages: Array.from({ length: Number(config.n) }, (_, n) => ({
          body: { n, third: n % 3 === 2 },
        })),
      }),
    }),
  },
  {
    type: "not_every_third",
    description: "a condition: false for every third message",
    create: () => ({
      type: "not_every_third",
      process: (ctx) => ({ data: (ctx.message as { n: number }).n % 3 !== 2 }),
    }),
  },
];

let h: Harness;
beforeAll(async () => {
  const inner = createEmbeddedProvider({ mode: "memory" });
  const queue = forwarding(inner, {
    publish(destination, message) {
      if (destination.endsWith("/orders.in")) {
        const key = (message.body as { order: { key: string } }).order.key;
        const list = published.get(key) ?? [];
        list.push(message.id ?? "");
        published.set(key, list);
      }
      const list = priorities.get(destination) ?? [];
      list.push(message.priority);
      priorities.set(destination, list);
      return inner.publish(destination, message);
    },
  });
  h = await openHarness({ queue });
  for (const definition of adapters) h.engine.registry.register(definition);
});
afterAll(async () => {
  await h?.close();
});

describe("ordered message groups", () => {
  it("keeps per-key order end to end over 1,000 messages and 50 keys, 10% failing once, while other keys go on", async () => {
    const { id, status } = await h.run(`
name: grouped
settings:
  retry: { max_attempts: 3, initial_delay_ms: 150, multiplier: 1 }
init: { route: fan }
queues:
  orders.in:
    concurrency: 8
    group_by: { field: order.key }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: emit_orders }]
    outbound: [orders.in]
  orders:
    inbound: { queue: orders.in }
    adapters: [{ type: orders_sink }]
`);
    expect(status).toBe("completed");
    const runs = handled.get(id) ?? [];
    expect(runs.filter((r) => r.ok)).toHaveLength(MESSAGES);
    expect(runs.filter((r) => !r.ok)).toHaveLength(MESSAGES / 10);
    // Per key: every run in publish order, a failed message's retry straight after its failure.
    const messageRows = await h.rows(id, "message");
    const seqOfId = new Map(
      messageRows
        .filter((r) => r.route === "orders")
        .map((r) => [r.messageId, (r.payload as { seq: number }).seq] as const),
    );
    for (let k = 0; k < KEYS; k++) {
      const key = `k${k}`;
      const publishOrder = (published.get(key) ?? []).map((m) => seqOfId.get(m));
      const ofKey = runs.filter((r) => r.key === key);
      const successOrder = ofKey.filter((r) => r.ok).map((r) => r.seq);
      expect(successOrder, `key ${key} handled in publish order`).toEqual(publishOrder);
      ofKey.forEach((run, i) => {
        if (!run.ok)
          expect(ofKey[i + 1], `key ${key}: the retry comes next`).toMatchObject({
            seq: run.seq,
            attempt: 2,
          });
      });
    }
    // While a message waited for its retry, other keys were handled. (Near the end nothing else may
    // be left to run, so this is asserted for the failures of the first half of the run.)
    const failures = runs.filter((r) => !r.ok);
    const progressed = failures.map((failure) => {
      const retry = runs.find((r) => r.key === failure.key && r.seq === failure.seq && r.attempt === 2);
      return runs.filter((r) => r.key !== failure.key && r.at > failure.at && r.at < (retry?.at ?? 0)).length;
    });
    const early = progressed.slice(0, failures.length / 2);
    expect(Math.min(...early), "other keys progress while a key waits for its retry").toBeGreaterThan(0);
    console.info(
      `[queue-features] other-key runs during each retry wait: min ${Math.min(...progressed)}, median ${[...progressed].sort((a, b) => a - b)[progressed.length >> 1]}`,
    );
    const rows = messageRows.filter((r) => r.route === "orders");
    expect(rows.every((r) => r.status === "completed")).toBe(true);
  }, 120_000);
});

describe("conditions", () => {
  for (const [label, condition] of [
    ["a declarative predicate", "{ field: third, not_equals: true }"],
    ["a registered adapter", "{ adapter: not_every_third }"],
  ] as const) {
    it(`${label} skips every third message: acknowledged, lineage 'skipped', the execution completes`, async () => {
      const { id, status } = await h.run(`
name: conditional
init: { route: fan }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: count_to, config: { n: 30 } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 4 }
    condition: ${condition}
    adapters: [{ type: sink }]
`);
      expect(status).toBe("completed");
      const rows = (await h.rows(id, "message")).filter((r) => r.route === "work");
      const skipped = rows.filter((r) => r.status === "skipped");
      expect(skipped).toHaveLength(10);
      expect(skipped.every((r) => (r.payload as { n: number }).n % 3 === 2)).toBe(true);
      expect(rows.filter((r) => r.status === "completed")).toHaveLength(20);
      const sinkRows = (await h.rows(id, "adapter")).filter((r) => r.adapter === "sink");
      expect(sinkRows).toHaveLength(20);
    });
  }
});

describe("step conditions", () => {
  it("skip one adapter of the chain: its input passes on, its row is 'skipped'", async () => {
    const { id, status } = await h.run(`
name: step-conditional
init: { route: fan }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: count_to, config: { n: 9 } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in }
    adapters:
      - type: json_transform
        config: { set: { marked: true } }
        condition: { field: third, equals: true }
      - type: sink
`);
    expect(status).toBe("completed");
    const steps = (await h.rows(id, "adapter")).filter((r) => r.adapter === "json_transform");
    expect(steps.filter((r) => r.status === "skipped")).toHaveLength(6);
    expect(steps.filter((r) => r.status === "completed")).toHaveLength(3);
    const messages = (await h.rows(id, "message")).filter((r) => r.route === "work");
    expect(messages.every((r) => r.status === "completed")).toBe(true);
  });
});

describe("per-route timeout and dead-lettering", () => {
  it("aborts a route's handler after its own timeout_ms; dead_letter: false drops instead of dead-lettering", async () => {
    const { id, status } = await h.run(`
name: timeouts
settings:
  retry: { max_attempts: 1 }
init: { route: fan }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: count_to, config: { n: 1 } }]
    outbound: [slow.in, drop.in]
  slow:
    inbound: { queue: slow.in, timeout_ms: 200 }
    adapters: [{ type: hang }]
  drop:
    inbound: { queue: drop.in, dead_letter: false }
    adapters: [{ type: fail, config: { mode: permanent } }]
`);
    expect(status).toBe("completed");
    const slow = await h.queue.admin.stats({ destination: `/queue/${id}/slow.in` });
    expect(slow.dlqDepth, "the hung handler was aborted after 200 ms and dead-lettered").toBe(1);
    const dead = await h.queue.admin.browseDeadLetters(
      { destination: `/queue/${id}/slow.in` },
      { offset: 0, limit: 1 },
    );
    expect(dead.items[0]?.lastError).toContain("timed out after 200 ms");
    const drop = await h.queue.admin.stats({ destination: `/queue/${id}/drop.in` });
    expect(drop.dlqDepth, "dropped, not dead-lettered").toBe(0);
    const rows = (await h.rows(id, "message")).filter((r) => r.route === "drop");
    expect(rows.map((r) => r.status)).toEqual(["failed"]);
  });
});

describe("pause and resume", () => {
  it("a route with concurrency 0 consumes nothing until its queue is reconfigured, and loses nothing", async () => {
    const config = await loadPipelineConfig(
      `
name: paused
init: { route: fan }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: count_to, config: { n: 12 } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 0 }
    adapters: [{ type: sink }]
`,
      { registry: h.engine.registry },
    );
    const record = await h.engine.service.create({ config });
    const orchestrator = await waitFor(() => h.engine.manager.get(record.id), "orchestrator");
    const destination = `/queue/${record.id}/work.in`;
    await waitFor(async () => (await h.queue.admin.stats({ destination })).depth === 12, "12 waiting");
    await new Promise((r) => setTimeout(r, 300));
    expect((await h.engine.service.get(record.id)).status).toBe("running");
    expect(orchestrator.processors.find((p) => p.name === "work")?.isPaused).toBe(true);
    const inbound = { ...config.routes.work!.inbound, concurrency: 3 };
    expect(await orchestrator.reconfigureQueue("work.in", inbound)).toBe(true);
    const end = await orchestrator.done;
    expect(end).toBe("completed");
    const rows = (await h.rows(record.id, "message")).filter((r) => r.route === "work");
    expect(rows.filter((r) => r.status === "completed")).toHaveLength(12);
  });

  it("rejects a pipeline that needs a capability the provider does not declare", async () => {
    const yaml = `
name: needs-groups
init: { route: a }
routes:
  a:
    inbound: { queue: a.in, group_by: { header: x-tenant }, priority: { max: 5, from: { field: urgency } } }
    adapters: [{ type: sink }]
`;
    const provider = {
      name: "minimal",
      capabilities: { ...h.queue.capabilities, orderedGroups: undefined, priorities: false },
    } as const;
    await expect(loadPipelineConfig(yaml, { provider: provider as never })).rejects.toThrow(
      /orderedGroups is not true[\s\S]*capabilities.priorities is false/,
    );
    await expect(loadPipelineConfig(yaml, { provider: h.queue })).resolves.toBeDefined();
  });
});

describe("priorities from a payload field", () => {
  it("stamps the priority read from the payload (clamped to 0-9) on messages published to the queue", async () => {
    const { id, status } = await h.run(`
name: ranked
init: { route: fan }
queues:
  work.in:
    priority: { max: 10, from: { field: n } }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: count_to, config: { n: 12 } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in }
    adapters: [{ type: sink }]
`);
    expect(status).toBe("completed");
    const stamped = priorities.get(`/queue/${id}/work.in`) ?? [];
    expect([...stamped].sort((a, b) => (a ?? -1) - (b ?? -1))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]);
    expect(priorities.get(`/queue/${id}/fan.in`)).toEqual([undefined]);
  });
});
