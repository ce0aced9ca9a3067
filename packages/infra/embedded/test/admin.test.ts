import { afterEach, describe, expect, it } from "vitest";
import { createEmbeddedProvider, type EmbeddedProvider } from "../src/index.js";
import { waitFor } from "./helpers.js";

let provider: EmbeddedProvider;
afterEach(async () => {
  await provider?.close();
});

describe("admin", () => {
  it("lists queues and topics with their subscriptions", async () => {
    provider = createEmbeddedProvider();
    const p = provider;
    await p.connect();
    await p.publish("/queue/b", { body: 1 });
    await p.subscribe("/queue/a", () => "ACKNOWLEDGED", { subscription: "s" });
    await p.subscribe("/topic/t", () => "ACKNOWLEDGED", { subscription: "x" });
    await p.subscribe("/topic/t", () => "ACKNOWLEDGED", { subscription: "y" });
    expect(await p.admin.listDestinations()).toEqual([
      { destination: "/queue/a", kind: "queue" },
      { destination: "/queue/b", kind: "queue" },
      { destination: "/topic/t", kind: "topic", subscriptions: ["x", "y"] },
    ]);
  });

  it("reports exact stats and browses, redrives and discards dead letters exactly", async () => {
    provider = createEmbeddedProvider();
    const p = provider;
    await p.connect();
    const q = "/queue/adm";
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await p.publish(q, { body: { i } })).id);
    expect(await p.admin.stats({ destination: q })).toEqual({
      destination: q,
      depth: 5,
      consumers: 0,
      inFlight: 0,
      dlqDepth: 0,
    });

    let release: (() => void) | undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const sub = await p.subscribe(
      q,
      async (d) => {
        const i = (d.message.body as { i: number }).i;
        if (i === 4) {
          await held;
          return "ACKNOWLEDGED" as const;
        }
        return "REJECTED";
      },
      { subscription: "s", concurrency: 5 },
    );
    await waitFor(() => p.counters().deadLettered === 4, "four dead letters");
    expect(await p.admin.stats({ destination: q })).toEqual({
      destination: q,
      depth: 0,
      consumers: 1,
      inFlight: 1,
      dlqDepth: 4,
    });
    release?.();
    await waitFor(() => p.counters().acked === 1, "the held ack");
    await sub.unsubscribe();

    const page1 = await p.admin.browseDeadLetters({ destination: q }, { offset: 0, limit: 3 });
    const page2 = await p.admin.browseDeadLetters({ destination: q }, { offset: 3, limit: 3 });
    expect(page1.total).toBe(4);
    expect(page1.offset).toBe(0);
    expect(page1.items.map((l) => l.message.id)).toEqual(ids.slice(0, 3));
    expect(page2.items.map((l) => l.message.id)).toEqual(ids.slice(3, 4));
    // Browsing never removes anything.
    expect((await p.admin.stats({ destination: q })).dlqDepth).toBe(4);

    expect(await p.admin.discardOne({ destination: q }, ids[0] as string)).toEqual({ discarded: true });
    expect(await p.admin.discardOne({ destination: q }, ids[0] as string)).toEqual({ discarded: false });
    expect(await p.admin.redriveOne({ destination: q }, ids[1] as string)).toEqual({ redriven: true });
    expect(await p.admin.redriveOne({ destination: q }, "no-such-id")).toEqual({ redriven: false });
    expect(await p.admin.stats({ destination: q })).toMatchObject({ depth: 1, dlqDepth: 2 });
    expect(await p.admin.redriveAll({ destination: q })).toEqual({ redriven: 2 });
    expect(await p.admin.stats({ destination: q })).toMatchObject({ depth: 3, dlqDepth: 0 });
    expect(await p.admin.redriveAll({ destination: q })).toEqual({ redriven: 0 });

    const attempts: number[] = [];
    await p.subscribe(
      q,
      (d) => {
        attempts.push(d.attempt);
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s2" },
    );
    await waitFor(() => attempts.length === 3, "the redriven messages");
    expect(attempts).toEqual([1, 1, 1]);
    expect(await p.admin.stats({ destination: q })).toEqual({
      destination: q,
      depth: 0,
      consumers: 1,
      inFlight: 0,
      dlqDepth: 0,
    });
  });

  it("needs a subscription to address a topic's dead letters and reports zeros for unknown destinations", async () => {
    provider = createEmbeddedProvider();
    const p = provider;
    await p.connect();
    await expect(
      p.admin.browseDeadLetters({ destination: "/topic/t" }, { offset: 0, limit: 1 }),
    ).rejects.toMatchObject({
      code: "invalid_argument",
    });
    await expect(p.admin.stats({ destination: "nope" })).rejects.toMatchObject({
      code: "invalid_destination",
    });
    expect(await p.admin.stats({ destination: "/queue/never" })).toEqual({
      destination: "/queue/never",
      depth: 0,
      consumers: 0,
      inFlight: 0,
      dlqDepth: 0,
    });
  });
});
