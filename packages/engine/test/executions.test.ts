import { adapters } from "@factflow/adapters";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ExecutionScopedQueue, subscriptionSuffix } from "../src/execution/execution-scoped-queue.js";
import type { ExecutionEvent } from "../src/index.js";
import { createEngine, loadPipelineConfig, TooManyConcurrentExecutionsError, uuidv7 } from "../src/index.js";
import {
  blocks,
  concurrency,
  type Harness,
  memoryStorage,
  openHarness,
  seen,
  testAdapters,
  waitFor,
} from "./harness.js";

const TWO_STEP = `
name: two-step
init: { route: first, message: { tag: default } }
routes:
  first:
    inbound: { queue: first.in, concurrency: 2 }
    adapters:
      - type: split
        config: { field: items, as: item, include: [tag] }
    outbound: [second.in]
  second:
    inbound: { queue: second.in, concurrency: 3 }
    adapters: [{ type: delay, config: { ms: 2 } }, { type: sink }]
`;

let h: Harness;
beforeAll(async () => {
  h = await openHarness({ maxConcurrent: 2 });
});
afterAll(async () => {
  blocks.released = true;
  await h?.close();
});

describe("ExecutionScopedQueue", () => {
  it("scopes queue names and subscription names, and leaves topics shared", () => {
    const scoped = new ExecutionScopedQueue(h.queue, "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    expect(scoped.scope("/queue/parse.in")).toBe("/queue/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/parse.in");
    expect(scoped.scope(scoped.scope("/queue/parse.in"))).toBe(
      "/queue/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/parse.in",
    );
    expect(scoped.scope("/topic/config.reloaded")).toBe("/topic/config.reloaded");
    const suffix = subscriptionSuffix("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    expect(suffix).toMatch(/^[0-9a-f]{8}$/);
    expect(scoped.scopeSubscription("web-scraper")).toBe(`web-scraper:${suffix}`);
    expect(scoped.scopeSubscription(`web-scraper:${suffix}`)).toBe(`web-scraper:${suffix}`);
    expect(() => scoped.scope("parse.in")).toThrow(/must start with/);
  });

  it("gives 100 executions created in the same second 100 distinct subscription suffixes", () => {
    // The start of a 65.5 s window: every id below shares its first 8 hex chars.
    const now = Math.floor(Date.now() / 65_536) * 65_536;
    const ids = Array.from({ length: 100 }, (_, i) => uuidv7(now + (i % 1000)));
    expect(new Set(ids.map((id) => id.slice(0, 8))).size, "the old prefix collides").toBe(1);
    const names = ids.map((id) => new ExecutionScopedQueue(h.queue, id).scopeSubscription("route"));
    expect(new Set(names).size).toBe(100);
  });

  it("keeps two executions of the same config running at once apart", async () => {
    const config = await loadPipelineConfig(TWO_STEP, { registry: h.engine.registry });
    const items = Array.from({ length: 20 }, (_, i) => i);
    const [a, b] = await Promise.all([
      h.engine.service.create({ config, input: { tag: "A", items } }),
      h.engine.service.create({ config, input: { tag: "B", items } }),
    ]);
    const destinations = (await h.queue.admin.listDestinations()).map((d) => d.destination);
    expect(destinations).toContain(`/queue/${a.id}/second.in`);
    expect(destinations).toContain(`/queue/${b.id}/second.in`);
    const [endA, endB] = await Promise.all([
      h.engine.service.waitForEnd(a.id, 60_000),
      h.engine.service.waitForEnd(b.id, 60_000),
    ]);
    expect([endA, endB]).toEqual(["completed", "completed"]);
    for (const [record, tag] of [
      [a, "A"],
      [b, "B"],
    ] as const) {
      const bodies = (seen.get(record.id) ?? []).map((s) => s.body as { tag: string; item: number });
      expect(bodies).toHaveLength(20);
      expect(bodies.every((body) => body.tag === tag)).toBe(true);
      expect(bodies.map((body) => body.item).sort((x, y) => x - y)).toEqual(items);
    }
  });
});

describe("route processor gating", () => {
  it("never runs more handlers than max_handlers across routes, nor more than concurrency per route", async () => {
    const { id, status } = await h.run(`
name: gated
settings: { max_handlers: 3 }
init: { route: fan, message: { items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] } }
routes:
  fan:
    inbound: { queue: fan.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [a.in, b.in]
  a:
    inbound: { queue: a.in, concurrency: 2, prefetch: 20 }
    adapters: [{ type: track }]
  b:
    inbound: { queue: b.in, concurrency: 10, prefetch: 20 }
    adapters: [{ type: track }]
`);
    expect(status).toBe("completed");
    expect(concurrency.get(id)?.max).toBe(3);
    expect(concurrency.get(`${id}/a`)?.max).toBeLessThanOrEqual(2);
    expect(concurrency.get(`${id}/b`)?.max).toBeLessThanOrEqual(3);
    expect(concurrency.get(`${id}/b`)?.max).toBeGreaterThanOrEqual(2);
  });
});

describe("OrchestratorManager and ExecutionService", () => {
  it("refuses an input with a NUL deep in a large array, naming its path, and stores nothing", async () => {
    const config = await loadPipelineConfig(TWO_STEP, { registry: h.engine.registry });
    // Far more than one turn's worth of the hazard walk.
    const items = Array.from({ length: 100_000 }, (_, i) => ({ i, name: `item ${i}` }));
    (items[98_765] as { name: string }).name = "item\u0000";
    const before = (await h.db.executions.listExecutions()).total;
    await expect(h.engine.service.create({ config, input: { tag: "N", items } })).rejects.toMatchObject({
      code: "invalid_message",
      message: expect.stringContaining("$.items[98765].name contains a NUL character"),
    });
    expect((await h.db.executions.listExecutions()).total).toBe(before);
  });

  it("caps concurrent executions with TooManyConcurrentExecutionsError, and frees the slot on cancel", async () => {
    blocks.released = false;
    const config = await loadPipelineConfig(
      `name: hold\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: r.in }\n    adapters: [{ type: block }]\n`,
      { registry: h.engine.registry },
    );
    const first = await h.engine.service.create({ config });
    const second = await h.engine.service.create({ config });
    const refused = h.engine.service.create({ config });
    await expect(refused).rejects.toBeInstanceOf(TooManyConcurrentExecutionsError);
    await expect(refused).rejects.toMatchObject({ code: "too_many_executions" });
    expect(h.engine.manager.active().sort()).toEqual([first.id, second.id].sort());
    expect(await h.engine.service.cancel(first.id)).toBe("cancelled");
    const third = await h.engine.service.create({ config });
    await h.engine.service.cancel(second.id);
    await h.engine.service.cancel(third.id);
    expect(h.engine.manager.active()).toEqual([]);
    const events: ExecutionEvent[] = [];
    for await (const e of h.engine.service.events(first.id)) events.push(e);
    expect(events[0]?.type).toBe("started");
    expect(events.at(-1)?.type).toBe("cancelled");
  });

  it("writes nothing for a start refused at the cap: concurrent creates, and a resume, leave no row behind", async () => {
    blocks.released = false;
    const config = await loadPipelineConfig(
      `name: hold\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: r.in }\n    adapters: [{ type: block }]\n`,
      { registry: h.engine.registry },
    );
    const before = (await h.db.executions.listExecutions({ limit: 500 })).total;
    const left = await h.db.executions.createExecution({
      id: uuidv7(),
      configName: "hold",
      configVersion: null,
      configSnapshot: config,
      input: null,
    });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 8 }, () => h.engine.service.create({ config })),
    );
    const created = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.id] : []));
    const refused = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason] : []));
    expect(created).toHaveLength(2);
    expect(refused).toHaveLength(6);
    for (const error of refused) expect(error).toBeInstanceOf(TooManyConcurrentExecutionsError);
    await expect(h.engine.service.resume(left.id)).rejects.toBeInstanceOf(TooManyConcurrentExecutionsError);
    const after = await h.db.executions.listExecutions({ limit: 500 });
    expect(after.total).toBe(before + 3);
    expect(after.items.filter((r) => r.status === "failed" && r.createdAt >= left.createdAt)).toEqual([]);
    expect((await h.engine.service.get(left.id)).status).toBe("running");
    for (const id of created) await h.engine.service.cancel(id);
    await h.engine.service.cancel(left.id);
    expect(h.engine.manager.active()).toEqual([]);
  });

  it("replays a segment from a route's recorded inputs, all or selected, as a linked execution", async () => {
    const config = await loadPipelineConfig(TWO_STEP, { registry: h.engine.registry });
    const parent = await h.engine.service.create({ config, input: { tag: "P", items: [1, 2, 3] } });
    expect(await h.engine.service.waitForEnd(parent.id, 60_000)).toBe("completed");

    const all = await h.engine.service.replay(parent.id, { fromRoute: "second" });
    expect(all.parentExecutionId).toBe(parent.id);
    expect(all.replayFromRoute).toBe("second");
    expect(all.configSnapshot).toEqual(parent.configSnapshot);
    expect(await h.engine.service.waitForEnd(all.id, 60_000)).toBe("completed");
    const replayed = (seen.get(all.id) ?? []).map((s) => (s.body as { item: number }).item).sort();
    expect(replayed).toEqual([1, 2, 3]);

    const inputs = await h.db.lineage.routeInputs(parent.id, "second");
    const chosen = inputs.find((i) => (i.payload as { item: number }).item === 2);
    const one = await h.engine.service.replay(parent.id, {
      fromRoute: "second",
      messageIds: [chosen?.messageId ?? ""],
    });
    expect(await h.engine.service.waitForEnd(one.id, 60_000)).toBe("completed");
    expect((seen.get(one.id) ?? []).map((s) => (s.body as { item: number }).item)).toEqual([2]);
    // The first route did not run in the replay.
    expect((await h.rows(one.id, "message")).every((r) => r.route === "second")).toBe(true);

    await expect(h.engine.service.replay(parent.id, { fromRoute: "nope" })).rejects.toThrow(
      /not in the snapshot/,
    );
    // Unknown ids are named, never dropped without a word.
    const mixed = h.engine.service.replay(parent.id, {
      fromRoute: "second",
      messageIds: [chosen?.messageId ?? "", "no-such-message"],
    });
    await expect(mixed).rejects.toMatchObject({ code: "invalid_argument" });
    await expect(mixed).rejects.toThrow(/no input with message id no-such-message/);
  });

  it("refuses to replay an execution that has not ended", async () => {
    blocks.released = false;
    const config = await loadPipelineConfig(
      "name: held\ninit: { route: wait }\nroutes:\n  wait:\n    inbound: { queue: wait.in }\n    adapters: [{ type: sink }, { type: block }]\n",
      { registry: h.engine.registry },
    );
    const running = await h.engine.service.create({ config });
    const refused = h.engine.service.replay(running.id, { fromRoute: "wait" });
    await expect(refused).rejects.toMatchObject({ code: "execution_not_running" });
    await expect(refused).rejects.toThrow(/still running/);
    blocks.released = true;
    expect(await h.engine.service.waitForEnd(running.id, 60_000)).toBe("completed");
  });

  it("streams events with increasing ids and replays them after a Last-Event-ID", async () => {
    const config = await loadPipelineConfig(TWO_STEP, { registry: h.engine.registry });
    const record = await h.engine.service.create({ config, input: { tag: "E", items: [1, 2] } });
    const live: ExecutionEvent[] = [];
    for await (const e of h.engine.service.events(record.id)) live.push(e);
    expect(live[0]?.type).toBe("started");
    expect(live.at(-1)?.type).toBe("completed");
    expect(live.at(-1)?.data.completionDelayMs).toBeTypeOf("number");
    const after: ExecutionEvent[] = [];
    for await (const e of h.engine.service.events(record.id, { afterId: 2 })) after.push(e);
    expect(after.map((e) => e.id)).toEqual(live.filter((e) => e.id > 2).map((e) => e.id));
  });

  it("resumes a running execution after a shutdown", async () => {
    blocks.released = false;
    const config = await loadPipelineConfig(
      `name: resume\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: r.in }\n    adapters: [{ type: block }, { type: sink }]\n`,
      { registry: h.engine.registry },
    );
    const entered = blocks.entered;
    const record = await h.engine.service.create({ config });
    await waitFor(() => blocks.entered > entered, "the handler to start");
    await h.engine.manager.get(record.id)?.stop();
    expect((await h.engine.service.get(record.id)).status).toBe("running");
    blocks.released = true;
    await h.engine.service.resume(record.id);
    expect(await h.engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    expect(seen.get(record.id)).toHaveLength(1);
  });

  it("fails a running execution on request, and shuts down gracefully (leave running, or cancel)", async () => {
    blocks.released = false;
    const engine = createEngine({
      queue: h.queue,
      lineage: h.db.lineage,
      executions: h.db.executions,
      storage: memoryStorage(),
      adapters: [...adapters, ...testAdapters],
    });
    const config = await loadPipelineConfig(
      `name: stop-all\ninit: { route: r }\nroutes:\n  r:\n    inbound: { queue: r.in }\n    adapters: [{ type: block }]\n`,
      { registry: engine.registry },
    );
    const failed = await engine.service.create({ config });
    expect(await engine.service.fail(failed.id, "operator stopped it")).toBe("failed");
    expect((await engine.service.get(failed.id)).error).toBe("operator stopped it");

    const left = await engine.service.create({ config });
    await engine.shutdown();
    expect(engine.manager.active()).toEqual([]);
    expect((await engine.service.get(left.id)).status).toBe("running");
    // An orphaned running row can still be closed by hand.
    expect(await engine.service.complete(left.id)).toBe("completed");

    const other = createEngine({
      queue: h.queue,
      lineage: h.db.lineage,
      executions: h.db.executions,
      storage: memoryStorage(),
      adapters: [...adapters, ...testAdapters],
    });
    const cancelled = await other.service.create({ config });
    await other.shutdown({ cancel: true });
    expect((await other.service.get(cancelled.id)).status).toBe("cancelled");
    await expect(other.service.create({ config })).rejects.toMatchObject({ code: "cancelled" });
  });
});
