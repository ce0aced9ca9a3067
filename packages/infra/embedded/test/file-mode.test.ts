import { readdir, readFile, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createEmbeddedProvider, type EmbeddedConfigInput, type EmbeddedProvider } from "../src/index.js";
import { recordingLogger, tempDir, waitFor } from "./helpers.js";

let dir: { path: string; remove: () => Promise<void> };
const open: EmbeddedProvider[] = [];

beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
  await dir.remove();
});

async function start(extra: EmbeddedConfigInput = {}, logger = recordingLogger()): Promise<EmbeddedProvider> {
  const p = createEmbeddedProvider({ mode: "file", dataDir: dir.path, ...extra }, { logger });
  open.push(p);
  await p.connect();
  return p;
}

async function stop(p: EmbeddedProvider): Promise<void> {
  await p.close();
  open.splice(open.indexOf(p), 1);
}

describe("file mode", () => {
  it("recovers waiting messages, dead letters, scheduled retries, definitions and subscriptions on restart", async () => {
    const first = await start();
    await first.defineQueue("/queue/fifo", { ordering: "fifo", groupBy: "k", concurrency: 4 });
    const keeper = await first.subscribe("/topic/news", () => "ACKNOWLEDGED", { subscription: "keeper" });
    await keeper.unsubscribe();
    const sub = await first.subscribe(
      "/queue/work",
      (d) => {
        const n = (d.message.body as { n: number }).n;
        if (n < 3) return "ACKNOWLEDGED" as const;
        if (n < 5) return "REJECTED";
        return { status: "FAILED", reason: "later" };
      },
      { subscription: "s", retry: { maxAttempts: 5, initialDelayMs: 60_000 } },
    );
    for (let n = 0; n < 7; n++) await first.publish("/queue/work", { body: { n } });
    await waitFor(
      () =>
        first.counters().acked === 3 && first.counters().deadLettered === 2 && first.counters().retried === 2,
      "settlements",
    );
    await sub.unsubscribe();
    for (let n = 0; n < 3; n++) await first.publish("/queue/fifo", { body: { k: "a", n } });
    await first.publish("/topic/news", { body: "while nobody listens" });
    await stop(first);

    const second = await start();
    expect(second.storeStats()).toMatchObject({ recoveredMessages: 8, corruptTails: 0 });
    expect(await second.admin.stats({ destination: "/queue/work" })).toMatchObject({
      depth: 2,
      dlqDepth: 2,
      inFlight: 0,
    });
    const dead = await second.admin.browseDeadLetters(
      { destination: "/queue/work" },
      { offset: 0, limit: 10 },
    );
    expect(dead.items.map((l) => [(l.message.body as { n: number }).n, l.reason])).toEqual([
      [3, "rejected"],
      [4, "rejected"],
    ]);
    expect(await second.admin.listDestinations()).toContainEqual({
      destination: "/topic/news",
      kind: "topic",
      subscriptions: ["keeper"],
    });
    expect((await second.admin.stats({ destination: "/topic/news", subscription: "keeper" })).depth).toBe(1);
    // The retries keep their schedule (a minute away) and attempt number.
    const retried: number[] = [];
    await second.subscribe(
      "/queue/work",
      (d) => {
        retried.push(d.attempt);
        return "ACKNOWLEDGED" as const;
      },
      {
        subscription: "s",
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(retried).toEqual([]);
    // The definition came back: 4 concurrent handlers allowed, same group strictly in order.
    const order: number[] = [];
    await second.subscribe(
      "/queue/fifo",
      (d) => {
        order.push((d.message.body as { n: number }).n);
        return "ACKNOWLEDGED" as const;
      },
      {
        subscription: "s",
      },
    );
    await waitFor(() => order.length === 3, "fifo messages");
    expect(order).toEqual([0, 1, 2]);
    expect(
      (await second.defineQueue("/queue/fifo", { ordering: "fifo", groupBy: "k", concurrency: 4 })).changed,
    ).toBe(false);
  });

  it("confirms a publish whose record alone fills a group commit, and every publish of a burst that crosses the bound", async () => {
    const first = await start({ groupCommitMaxBytes: 4096 });
    // One record larger than the bound starts its commit at once, from inside the publish.
    await first.publish("/queue/big", { body: { text: "x".repeat(10_000) } });
    // A burst whose sixth record crosses the bound, nothing written after it.
    await Promise.all(
      Array.from({ length: 6 }, (_, n) =>
        first.publish("/queue/big", { body: { n, text: "y".repeat(700) } }),
      ),
    );
    expect(first.counters()).toMatchObject({ published: 7, confirmed: 7 });
    await stop(first);

    const second = await start({ groupCommitMaxBytes: 4096 });
    expect(second.storeStats()).toMatchObject({ recoveredMessages: 7, corruptTails: 0 });
  });

  it("redrives and discards durably", async () => {
    const first = await start();
    await first.subscribe("/queue/d", () => "REJECTED", { subscription: "s" });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await first.publish("/queue/d", { body: i })).id);
    await waitFor(() => first.counters().deadLettered === 3, "dead letters");
    await stop(first);
    const second = await start();
    expect(await second.admin.discardOne({ destination: "/queue/d" }, ids[0] as string)).toEqual({
      discarded: true,
    });
    expect(await second.admin.redriveOne({ destination: "/queue/d" }, ids[1] as string)).toEqual({
      redriven: true,
    });
    await stop(second);
    const third = await start();
    expect(await third.admin.stats({ destination: "/queue/d" })).toMatchObject({ depth: 1, dlqDepth: 1 });
    const page = await third.admin.browseDeadLetters({ destination: "/queue/d" }, { offset: 0, limit: 5 });
    expect(page.items.map((l) => l.message.id)).toEqual([ids[2]]);
  });

  it("detects a torn tail, reports its offset, moves it aside and keeps every intact record", async () => {
    const first = await start();
    for (let i = 0; i < 5; i++) await first.publish("/queue/t", { body: { i, pad: "x".repeat(50) } });
    await stop(first);
    const log = join(dir.path, "queue.log");
    const size = (await stat(log)).size;
    await truncate(log, size - 20);
    const logger = recordingLogger();
    const second = await start({}, logger);
    const stats = second.storeStats();
    expect(stats.corruptTails).toBe(1);
    // The cut fell in the copy of the last publish record: its first frame is intact.
    expect(stats.recoveredMessages).toBe(5);
    expect(stats.corruptTail?.problem).toMatch(/torn/);
    const offset = stats.corruptTail?.offset ?? -1;
    expect(offset).toBeGreaterThan(8);
    expect(stats.corruptTail?.bytes).toBe(size - 20 - offset);
    const warning = logger.lines.find((l) => l.level === "warn");
    expect(warning?.message).toContain(`at byte ${offset}`);
    const moved = (await readdir(dir.path)).filter((f) => f.startsWith("queue.log.corrupt-"));
    expect(moved).toHaveLength(1);
    expect((await stat(join(dir.path, moved[0] as string))).size).toBe(size - 20 - offset);
    expect((await stat(log)).size).toBe(offset);
    expect((await second.admin.stats({ destination: "/queue/t" })).depth).toBe(5);
    // The cut log keeps working.
    await second.publish("/queue/t", { body: "after" });
    await stop(second);
    const third = await start();
    expect(third.storeStats()).toMatchObject({ recoveredMessages: 6, corruptTails: 0 });
  });

  it("detects a corrupted record by its CRC", async () => {
    const first = await start();
    for (let i = 0; i < 4; i++) await first.publish("/queue/c", { body: { i, text: "hello world" } });
    await stop(first);
    const log = join(dir.path, "queue.log");
    const data = await readFile(log);
    // Both copies of the last publish record: nothing intact follows, so it is a damaged tail.
    for (const at of [
      data.lastIndexOf("hello world") + 2,
      data.indexOf("hello world", data.indexOf('"i":3')) + 2,
    ])
      data[at] = (data[at] ?? 0) ^ 0xff;
    await writeFile(log, data);
    const second = await start();
    expect(second.storeStats().corruptTail?.problem).toBe("CRC mismatch");
    expect(second.storeStats().recoveredMessages).toBe(3);
  });

  it.each([
    ["the first copy", [0], 50, 1],
    ["the second copy", [1], 50, 1],
    ["both copies", [0, 1], 49, 0],
  ])(
    "loses nothing to a flipped byte in %s of a publish record but what has no intact copy, reports it, and rewrites the log",
    async (_, copies, recovered, restored) => {
      const first = await start();
      for (let i = 0; i < 50; i++) await first.publish("/queue/m", { body: { i, text: `message-${i}` } });
      await stop(first);
      const log = join(dir.path, "queue.log");
      const data = await readFile(log);
      const firstCopy = data.indexOf("message-20");
      const places = [firstCopy, data.indexOf("message-20", firstCopy + 1)];
      expect(places[1], "a publish record is written twice").toBeGreaterThan(firstCopy);
      for (const copy of copies) {
        const at = (places[copy] as number) + 3;
        data[at] = (data[at] ?? 0) ^ 0xff;
      }
      await writeFile(log, data);
      const logger = recordingLogger();
      const second = await start({}, logger);
      const stats = second.storeStats();
      expect(stats.corruptTails, "not a tail: records after the damage are read").toBe(0);
      expect(stats.damagedRanges).toBe(1);
      expect(stats.damaged?.restored).toBe(restored);
      expect(stats.recoveredMessages).toBe(recovered);
      expect(stats.damaged?.problems).toEqual(["CRC mismatch"]);
      expect(second.health?.().problems[0]).toMatch(/damaged in 1 place/);
      expect(logger.lines.some((l) => l.level === "error" && /damaged in 1 place/.test(l.message))).toBe(
        true,
      );
      const bodies: number[] = [];
      await second.subscribe(
        "/queue/m",
        (d) => {
          bodies.push((d.message.body as { i: number }).i);
          return "ACKNOWLEDGED";
        },
        { subscription: "check", concurrency: 1 },
      );
      await waitFor(() => bodies.length === recovered, `${recovered} deliveries`, 60_000);
      expect(bodies).toEqual(
        Array.from({ length: 50 }, (_, i) => i).filter((i) => recovered === 50 || i !== 20),
      );
      await stop(second);
      // The log was rewritten without the damage: the next start finds none.
      const third = await start();
      expect(third.storeStats()).toMatchObject({ damagedRanges: 0, corruptTails: 0 });
      expect(third.health?.().problems).toEqual([]);
    },
  );

  it("reclaims a log that is almost all dead (an ended execution) well below compactAfterBytes", async () => {
    const first = await start();
    const pad = "x".repeat(200);
    // In batches, so group commit writes them with few syncs.
    for (let batch = 0; batch < 10; batch++) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, j) =>
          first.publish("/queue/done", { body: { i: batch * 1000 + j, pad } }),
        ),
      );
    }
    await first.publish("/queue/kept", { body: { kept: true } });
    let handled = 0;
    const sub = await first.subscribe(
      "/queue/done",
      () => {
        handled++;
        return "ACKNOWLEDGED";
      },
      { subscription: "drain", concurrency: 16, prefetch: 64 },
    );
    await waitFor(() => handled === 10_000, "10,000 acknowledgements", 60_000);
    await sub.unsubscribe();
    await stop(first);
    const size = (await stat(join(dir.path, "queue.log"))).size;
    // One live message of ~100 bytes left: the log shrank from megabytes to about that.
    expect(size).toBeLessThan(64 * 1024);
    const second = await start();
    expect(second.storeStats()).toMatchObject({ recoveredMessages: 1 });
    expect((await second.admin.stats({ destination: "/queue/kept" })).depth).toBe(1);
  }, 120_000);

  it("leaves a short log at close when what it holds is almost all dead, even below the running floor", async () => {
    const first = await start();
    const pad = "x".repeat(200);
    await Promise.all(
      Array.from({ length: 300 }, (_, i) => first.publish("/queue/done", { body: { i, pad } })),
    );
    await first.publish("/queue/kept", { body: { kept: true } });
    let handled = 0;
    await first.subscribe(
      "/queue/done",
      () => {
        handled++;
        return "ACKNOWLEDGED";
      },
      { subscription: "drain", concurrency: 16 },
    );
    await waitFor(() => handled === 300, "300 acknowledgements");
    // Hundreds of KB: below the 1 MiB floor that compaction waits for while the queue runs.
    expect(first.storeStats().logBytes).toBeGreaterThan(128 * 1024);
    expect(first.storeStats().compactions).toBe(0);
    await stop(first);
    expect((await stat(join(dir.path, "queue.log"))).size).toBeLessThan(64 * 1024);
    const second = await start();
    expect(second.storeStats()).toMatchObject({ recoveredMessages: 1 });
    expect((await second.admin.stats({ destination: "/queue/kept" })).depth).toBe(1);
  });

  it("compacts the log so it stays bounded while messages flow, and recovers the live set from it", async () => {
    const p = await start({ compactAfterBytes: 16_384, groupCommitMs: 1 });
    await p.subscribe("/queue/flow", () => "ACKNOWLEDGED", { subscription: "s", concurrency: 8 });
    await p.publish("/queue/keep", { body: { keep: true } });
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          p.publish("/queue/flow", { body: { round, i, pad: "y".repeat(100) } }),
        ),
      );
    }
    await waitFor(() => p.counters().acked === 1_000, "1000 acks");
    await p.publish("/queue/flow", { body: "flush" });
    const stats = p.storeStats();
    expect(stats.compactions).toBeGreaterThan(0);
    expect(stats.logBytes).toBeLessThan(64 * 1024);
    await stop(p);
    const again = await start();
    expect(again.storeStats().recoveredMessages).toBeLessThanOrEqual(1);
    expect((await again.admin.stats({ destination: "/queue/keep" })).depth).toBe(1);
    expect((await readdir(dir.path)).filter((f) => f.includes("compact"))).toEqual([]);
  });

  it("does not compact a log that holds nothing dead, however far past compactAfterBytes it grows", async () => {
    const p = await start({ compactAfterBytes: 16_384, groupCommitMs: 1 });
    const publishRound = (round: number) =>
      Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          p.publish("/queue/backlog", { body: { round, i, pad: "z".repeat(100) } }),
        ),
      );
    // The first batch past the threshold may be compacted: its messages count as live only once the
    // broker has taken them in, after the batch's write.
    await publishRound(0);
    await publishRound(1);
    const early = p.storeStats().compactions;
    for (let round = 2; round < 20; round++) await publishRound(round);
    const stats = p.storeStats();
    expect(stats.logBytes).toBeGreaterThan(8 * 16_384);
    // A copy would be as large as the log: compacting it reclaims nothing and only costs the copy.
    expect(stats.compactions).toBe(early);
    expect(stats.liveMessages).toBe(1_000);
  });

  it("refuses a second provider on the same data directory", async () => {
    await start();
    const other = createEmbeddedProvider({ mode: "file", dataDir: dir.path });
    await expect(other.connect()).rejects.toThrow(/already open/);
    await other.close();
  });
});
