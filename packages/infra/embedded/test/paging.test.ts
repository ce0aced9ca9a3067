import { open as openFile, readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { EmbeddedConfigInput, EmbeddedProvider } from "../src/index.js";
import { createEmbeddedProvider } from "../src/index.js";
import { recordingLogger, tempDir, waitFor } from "./helpers.js";

/**
 * The file mode keeps at most `memoryBudgetBytes` of waiting messages' content in memory; the rest
 * is read back from the log when delivered. These tests set a budget of a few messages so that most
 * of what they publish is paged out.
 */
let dir: { path: string; remove: () => Promise<void> };
const open: EmbeddedProvider[] = [];

beforeEach(async () => {
  dir = await tempDir();
});
afterEach(async () => {
  for (const p of open.splice(0)) await p.close();
  await dir.remove();
});

const BUDGET = 4_096;

async function start(extra: EmbeddedConfigInput = {}): Promise<EmbeddedProvider> {
  const logger = recordingLogger();
  const p = createEmbeddedProvider(
    { mode: "file", dataDir: dir.path, memoryBudgetBytes: BUDGET, ...extra },
    { logger },
  );
  open.push(p);
  await p.connect();
  return p;
}

async function stop(p: EmbeddedProvider): Promise<void> {
  await p.close();
  open.splice(open.indexOf(p), 1);
}

interface Seen {
  n: number;
  pad: string;
  id: string;
  header: string | undefined;
  correlationId: string;
}

/**
 * Consumes `count` messages of `destination` one at a time, in delivery order. A delivery beyond
 * `count` is held until the subscription stops, which hands it back unconsumed.
 */
async function consumeAll(p: EmbeddedProvider, destination: string, count: number): Promise<Seen[]> {
  const seen: Seen[] = [];
  const sub = await p.subscribe(
    destination,
    (d, signal) => {
      if (seen.length >= count) {
        return new Promise<"FAILED">((resolve) => signal.addEventListener("abort", () => resolve("FAILED")));
      }
      const body = d.message.body as { n: number; pad: string };
      seen.push({
        n: body.n,
        pad: body.pad,
        id: d.message.id,
        header: d.message.headers["x-n"],
        correlationId: d.message.correlationId,
      });
      return "ACKNOWLEDGED";
    },
    { subscription: "s", concurrency: 1, prefetch: 1 },
  );
  await waitFor(() => seen.length >= count, `${count} deliveries of ${destination}`);
  await sub.unsubscribe();
  return seen;
}

const pad = (n: number) => `${n}:${"p".repeat(200)}`;

describe("file mode memory budget", () => {
  it("keeps at most the budget of waiting content in memory and pages the rest out", async () => {
    const p = await start();
    const ids: string[] = [];
    for (let n = 0; n < 300; n++) {
      const { id } = await p.publish("/queue/backlog", { body: { n, pad: pad(n) } });
      ids.push(id);
      const stats = p.storeStats();
      expect(stats.residentBytes).toBeLessThanOrEqual(BUDGET);
    }
    const stats = p.storeStats();
    expect(stats.liveMessages).toBe(300);
    expect(stats.pagedOutMessages).toBeGreaterThan(250);
    expect(stats.liveBytes).toBeGreaterThan(10 * BUDGET);

    // Consumed one at a time, the content in memory stays within the budget plus the one delivery.
    let maxResident = 0;
    const seen: number[] = [];
    const seenIds: string[] = [];
    const sub = await p.subscribe(
      "/queue/backlog",
      (d) => {
        maxResident = Math.max(maxResident, p.storeStats().residentBytes);
        seen.push((d.message.body as { n: number }).n);
        seenIds.push(d.message.id);
        return "ACKNOWLEDGED";
      },
      { subscription: "s", concurrency: 1, prefetch: 1 },
    );
    await waitFor(() => seen.length === 300, "300 deliveries");
    await sub.unsubscribe();
    expect(seen).toEqual(Array.from({ length: 300 }, (_, n) => n));
    expect(seenIds).toEqual(ids);
    expect(maxResident).toBeLessThanOrEqual(BUDGET);
    expect(p.counters()).toMatchObject({ acked: 300, retried: 0 });
    expect(p.storeStats()).toMatchObject({ liveMessages: 0, residentBytes: 0, pagedOutMessages: 0 });
  });

  it("reads a paged-out message from the copy of its record when the first one is damaged, and says so", async () => {
    const logger = recordingLogger();
    const p = createEmbeddedProvider(
      { mode: "file", dataDir: dir.path, memoryBudgetBytes: BUDGET },
      { logger },
    );
    open.push(p);
    await p.connect();
    for (let n = 0; n < 100; n++) await p.publish("/queue/copy", { body: { n, pad: pad(n) } });
    expect(p.storeStats().pagedOutMessages).toBeGreaterThan(50);
    // The disk flips a byte in the first copy of message 60's record while the provider runs.
    const log = join(dir.path, "queue.log");
    const data = await readFile(log);
    const at = data.indexOf(pad(60)) + 10;
    const handle = await openFile(log, "r+");
    await handle.write(Buffer.from([(data[at] ?? 0) ^ 0xff]), 0, 1, at);
    await handle.close();
    const seen = await consumeAll(p, "/queue/copy", 100);
    expect(seen.map((s) => s.n)).toEqual(Array.from({ length: 100 }, (_, n) => n));
    expect(seen[60]?.pad).toBe(pad(60));
    expect(
      logger.lines.some(
        (l) => l.level === "error" && /record of message \d+ .* damaged; its copy was read/.test(l.message),
      ),
    ).toBe(true);
  });

  it("recovers a backlog larger than the budget and delivers it in order with bodies and headers intact", async () => {
    const first = await start();
    const published: string[] = [];
    for (let n = 0; n < 200; n++) {
      const { id } = await first.publish("/queue/big", {
        body: { n, pad: pad(n) },
        headers: { "x-n": String(n) },
        correlationId: `c-${n}`,
      });
      published.push(id);
    }
    expect(first.storeStats().pagedOutMessages).toBeGreaterThan(150);
    // Half of it consumed before the restart; their acks must hold.
    const before = await consumeAll(first, "/queue/big", 100);
    expect(before.map((s) => s.n)).toEqual(Array.from({ length: 100 }, (_, n) => n));
    await stop(first);

    const second = await start();
    expect(second.storeStats().recoveredMessages).toBe(100);
    expect(second.storeStats().residentBytes).toBeLessThanOrEqual(BUDGET);
    expect(second.storeStats().pagedOutMessages).toBeGreaterThan(50);
    const after = await consumeAll(second, "/queue/big", 100);
    expect(after).toEqual(
      Array.from({ length: 100 }, (_, i) => {
        const n = i + 100;
        return { n, pad: pad(n), id: published[n], header: String(n), correlationId: `c-${n}` };
      }),
    );
  });

  it("compacts a log whose live messages are paged out, and reads them from the compacted log", async () => {
    const p = await start({ compactAfterBytes: 16_384, groupCommitMs: 1 });
    for (let n = 0; n < 150; n++) await p.publish("/queue/kept", { body: { n, pad: pad(n) } });
    expect(p.storeStats().pagedOutMessages).toBeGreaterThan(100);
    // Traffic on another queue, acknowledged at once, makes most of the log dead.
    const flowed = { count: 0 };
    await p.subscribe(
      "/queue/flow",
      () => {
        flowed.count++;
        return "ACKNOWLEDGED";
      },
      { subscription: "f", concurrency: 8 },
    );
    for (let round = 0; round < 20; round++) {
      await Promise.all(
        Array.from({ length: 50 }, (_, i) => p.publish("/queue/flow", { body: { round, i, pad: pad(i) } })),
      );
    }
    await waitFor(() => flowed.count === 1_000, "1000 acks");
    await p.publish("/queue/flow", { body: "flush" });
    await waitFor(() => flowed.count === 1_001, "the flush");
    expect(p.storeStats().compactions).toBeGreaterThan(0);
    const seen = await consumeAll(p, "/queue/kept", 75);
    expect(seen.map((s) => [s.n, s.pad])).toEqual(Array.from({ length: 75 }, (_, n) => [n, pad(n)]));
    await stop(p);

    const again = await start();
    expect(again.storeStats().recoveredMessages).toBe(75);
    const rest = await consumeAll(again, "/queue/kept", 75);
    expect(rest.map((s) => [s.n, s.pad])).toEqual(
      Array.from({ length: 75 }, (_, i) => [i + 75, pad(i + 75)]),
    );
  });

  it("keeps priorities, FIFO groups and delays of paged-out messages", async () => {
    const p = await start();
    await p.defineQueue("/queue/groups", { ordering: "fifo", groupBy: "g" });
    await p.defineQueue("/queue/prio", { maxPriority: 9 });
    for (let n = 0; n < 120; n++) {
      await p.publish("/queue/groups", { body: { g: `g${n % 3}`, n, pad: pad(n) } });
      await p.publish("/queue/prio", { body: { n, pad: pad(n) }, priority: n % 10 });
    }
    const delayed = Date.now();
    for (let n = 0; n < 20; n++) await p.publish("/queue/later", { body: { n, pad: pad(n) }, delayMs: 200 });
    expect(p.storeStats().pagedOutMessages).toBeGreaterThan(200);

    const groups = new Map<string, number[]>();
    const gsub = await p.subscribe(
      "/queue/groups",
      (d) => {
        const body = d.message.body as { g: string; n: number; pad: string };
        expect(body.pad).toBe(pad(body.n));
        groups.set(body.g, [...(groups.get(body.g) ?? []), body.n]);
        return "ACKNOWLEDGED";
      },
      { subscription: "s", concurrency: 3 },
    );
    const prio = await consumeAll(p, "/queue/prio", 120);
    // One consumer with one slot: every highest priority first, publish order within a priority.
    const expected = Array.from({ length: 120 }, (_, n) => n).sort((a, b) => (b % 10) - (a % 10) || a - b);
    expect(prio.map((s) => s.n)).toEqual(expected);
    const later = await consumeAll(p, "/queue/later", 20);
    expect(Date.now() - delayed).toBeGreaterThanOrEqual(200);
    expect(later.map((s) => [s.n, s.pad])).toEqual(Array.from({ length: 20 }, (_, n) => [n, pad(n)]));
    await waitFor(
      () => [...groups.values()].reduce((k, l) => k + l.length, 0) === 120,
      "120 group deliveries",
    );
    await gsub.unsubscribe();
    for (let g = 0; g < 3; g++) {
      expect(groups.get(`g${g}`)).toEqual(Array.from({ length: 40 }, (_, i) => i * 3 + g));
    }
  });

  it("leaves the memory mode as it is: nothing is paged out", async () => {
    const p = createEmbeddedProvider({ mode: "memory", memoryBudgetBytes: 0 });
    open.push(p);
    await p.connect();
    for (let n = 0; n < 50; n++) await p.publish("/queue/m", { body: { n, pad: pad(n) } });
    expect(p.storeStats()).toMatchObject({ liveMessages: 50, pagedOutMessages: 0 });
    expect(p.storeStats().residentBytes).toBe(p.storeStats().liveBytes);
  });
});
