import { describe, expect, it } from "vitest";
import { providersClosedAfterEach, sleep, waitFor } from "./helpers.js";

const { connected } = providersClosedAfterEach();

describe("fifo", () => {
  it("delivers one at a time in publish order across competing consumers", async () => {
    const p = await connected();
    const order: number[] = [];
    let running = 0;
    let peak = 0;
    const handler = async (d: { message: { body: unknown } }) => {
      running++;
      peak = Math.max(peak, running);
      order.push(d.message.body as number);
      await sleep(1);
      running--;
      return "ACKNOWLEDGED" as const;
    };
    await p.subscribe("/queue/f", handler, { subscription: "a", ordering: "fifo", concurrency: 5 });
    await p.subscribe("/queue/f", handler, { subscription: "b", ordering: "fifo", concurrency: 5 });
    for (let i = 0; i < 40; i++) await p.publish("/queue/f", { body: i });
    await waitFor(() => order.length === 40, "40 deliveries");
    expect(order).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(peak).toBe(1);
  });

  it("keeps a retried message ahead of the ones published after it", async () => {
    const p = await connected();
    const order: string[] = [];
    await p.subscribe(
      "/queue/fr",
      (d) => {
        const n = d.message.body as number;
        order.push(`${n}@${d.attempt}`);
        return n === 1 && d.attempt < 3 ? "FAILED" : "ACKNOWLEDGED";
      },
      {
        subscription: "s",
        ordering: "fifo",
        retry: { maxAttempts: 5, initialDelayMs: 20, multiplier: 1, maxDelayMs: 20 },
      },
    );
    for (let i = 0; i < 4; i++) await p.publish("/queue/fr", { body: i });
    await waitFor(() => p.counters().acked === 4, "all acked");
    expect(order).toEqual(["0@1", "1@1", "1@2", "1@3", "2@1", "3@1"]);
  });
});

describe("fifo message groups", () => {
  it("keeps each group in order and runs different groups concurrently up to the concurrency", async () => {
    const p = await connected();
    const perGroup: Record<string, number[]> = {};
    const running = new Map<string, number>();
    let total = 0;
    let peak = 0;
    let sameGroupOverlap = false;
    await p.subscribe(
      "/queue/g",
      async (d) => {
        const { g, n } = d.message.body as { g: string; n: number };
        if ((running.get(g) ?? 0) > 0) sameGroupOverlap = true;
        running.set(g, (running.get(g) ?? 0) + 1);
        total++;
        peak = Math.max(peak, total);
        perGroup[g] = [...(perGroup[g] ?? []), n];
        await sleep(3);
        running.set(g, (running.get(g) ?? 0) - 1);
        total--;
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s", ordering: "fifo", groupBy: "g", concurrency: 3 },
    );
    const publishes: Promise<unknown>[] = [];
    for (let n = 0; n < 20; n++)
      for (const g of ["a", "b", "c", "d"]) publishes.push(p.publish("/queue/g", { body: { g, n } }));
    await Promise.all(publishes);
    await waitFor(() => p.counters().acked === 80, "80 acked", 60_000);
    for (const g of ["a", "b", "c", "d"])
      expect(perGroup[g]).toEqual(Array.from({ length: 20 }, (_, n) => n));
    expect(sameGroupOverlap).toBe(false);
    expect(peak).toBe(3);
  });

  it("applies a runtime definition to later subscriptions", async () => {
    const p = await connected();
    expect(
      await p.defineQueue("/queue/defined", { ordering: "fifo", groupBy: "session", concurrency: 2 }),
    ).toEqual({
      destination: "/queue/defined",
      changed: true,
    });
    expect(
      (await p.defineQueue("/queue/defined", { ordering: "fifo", groupBy: "session", concurrency: 2 }))
        .changed,
    ).toBe(false);
    let running = 0;
    let peak = 0;
    await p.subscribe(
      "/queue/defined",
      async () => {
        running++;
        peak = Math.max(peak, running);
        await sleep(5);
        running--;
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s" },
    );
    for (let i = 0; i < 12; i++) await p.publish("/queue/defined", { body: { session: `s${i % 4}` } });
    await waitFor(() => p.counters().acked === 12, "12 acked");
    expect(peak).toBe(2);
    await expect(p.defineQueue("/topic/x", {})).rejects.toMatchObject({ code: "invalid_destination" });
    await expect(p.defineQueue("/queue/x", { ordering: "random" } as never)).rejects.toMatchObject({
      code: "invalid_argument",
    });
  });
});

describe("priorities and delays", () => {
  it("delivers higher priorities first on a priority queue", async () => {
    const p = await connected();
    await p.defineQueue("/queue/p", { maxPriority: 10 });
    const priorities = [1, 9, 0, 5, 9, 3, 7];
    for (const [i, priority] of priorities.entries()) await p.publish("/queue/p", { body: i, priority });
    await p.publish("/queue/p", { body: "none" });
    const got: unknown[] = [];
    await p.subscribe(
      "/queue/p",
      (d) => {
        got.push(d.message.priority ?? "none");
        return "ACKNOWLEDGED" as const;
      },
      {
        subscription: "s",
        maxPriority: 10,
      },
    );
    await waitFor(() => got.length === 8, "8 deliveries");
    expect(got).toEqual([9, 9, 7, 5, 3, 1, 0, "none"]);
  });

  it("holds a delayed message until its time and counts it in the depth meanwhile", async () => {
    const p = await connected();
    const got: number[] = [];
    await p.subscribe(
      "/queue/d",
      () => {
        got.push(Date.now());
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s" },
    );
    const start = Date.now();
    await p.publish("/queue/d", { body: 1, delayMs: 120 });
    expect((await p.admin.stats({ destination: "/queue/d" })).depth).toBe(1);
    await waitFor(() => got.length === 1, "the delayed delivery");
    expect((got[0] ?? 0) - start).toBeGreaterThanOrEqual(115);
  });
});
