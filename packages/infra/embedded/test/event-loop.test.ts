import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { createEmbeddedProvider } from "../src/index.js";
import { nodeLogFile } from "../src/log-file.js";

const provider = createEmbeddedProvider({ mode: "memory" });
afterAll(() => provider.close());

describe("a saturated in-memory relay", () => {
  it("lets timers run while it works (the broker yields to the event loop)", async () => {
    await provider.connect();
    const HOPS = 200_000;
    let hops = 0;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    // Every handler settles at once and publishes the next hop: nothing but promise continuations.
    await provider.subscribe(
      "/queue/relay",
      async (delivery) => {
        hops++;
        if (hops === HOPS) done();
        if (hops < HOPS) await provider.publish("/queue/relay", { body: delivery.message.body });
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "relay", concurrency: 8, prefetch: 16 },
    );
    const started = performance.now();
    let timer: { firedAt: number; hops: number } | undefined;
    setTimeout(() => {
      timer = { firedAt: performance.now() - started, hops };
    }, 100);
    for (let i = 0; i < 8; i++) await provider.publish("/queue/relay", { body: { seed: i } });
    await finished;
    const total = performance.now() - started;
    console.log(
      `[factflow/embedded] 100 ms timer fired at ${timer?.firedAt.toFixed(1)} ms after ${timer?.hops} of ${HOPS} hops; relay took ${total.toFixed(0)} ms`,
    );
    // The timer ran while the relay was still going, not after it.
    expect(timer).toBeDefined();
    expect(timer!.hops).toBeLessThan(HOPS);
    expect(timer!.hops).toBeGreaterThan(0);
  });
});

describe("a route with hundreds of free slots", () => {
  it("does not start all of its handlers in one turn of the event loop", async () => {
    const wide = createEmbeddedProvider({ mode: "memory" });
    await wide.connect();
    try {
      const SLOTS = 256;
      for (let i = 0; i < SLOTS * 2; i++) await wide.publish("/queue/wide", { body: { i } });
      let started = 0;
      // Each handler works at least 1 ms before it returns, synchronously.
      const handler = () => {
        started++;
        const until = performance.now() + 1;
        while (performance.now() < until);
        return "ACKNOWLEDGED" as const;
      };
      let startedBeforeNextTurn: number | undefined;
      setImmediate(() => {
        startedBeforeNextTurn = started;
      });
      await wide.subscribe("/queue/wide", handler, {
        subscription: "wide",
        concurrency: SLOTS,
        prefetch: SLOTS,
      });
      await new Promise<void>((resolve) => setImmediate(resolve));
      // 256 free slots filled in one go would hold the loop for 256 ms or more: the broker stops
      // handing out messages once its slice is spent, and lets the loop turn.
      expect(startedBeforeNextTurn).toBeGreaterThan(0);
      expect(startedBeforeNextTurn).toBeLessThan(SLOTS);
    } finally {
      await wide.close();
    }
  });
});

describe("compacting the queue log", () => {
  it("lets the event loop run while it encodes a large copy", async () => {
    const dir = await mkdtemp(join(tmpdir(), "factflow-compact-slice-"));
    const path = join(dir, "queue.log");
    const file = nodeLogFile(path, await open(path, "a"));
    try {
      const PARTS = 400;
      let produced = 0;
      let copying = true;
      // What the copy had produced each time the event loop got a turn.
      const seenByTurns: number[] = [];
      const turn = () => {
        seenByTurns.push(produced);
        if (copying) setImmediate(turn);
      };
      setImmediate(turn);
      // Each part costs at least 1 ms of this thread, as re-encoding a paged-out message can.
      function* parts(): Generator<Buffer> {
        for (let i = 0; i < PARTS; i++) {
          const until = performance.now() + 1;
          while (performance.now() < until) {}
          produced++;
          yield Buffer.from(`${String(i).padStart(8, "0")}\n`);
        }
      }
      await file.replace(parts()).finally(() => {
        copying = false;
      });
      // The event loop had turns in the middle of the copy, not only before and after it.
      expect(seenByTurns.some((n) => n > 0 && n < PARTS)).toBe(true);
      // Every part is in the new log, in order.
      const lines = (await readFile(path, "utf8")).trimEnd().split("\n");
      expect(lines).toEqual(Array.from({ length: PARTS }, (_, i) => String(i).padStart(8, "0")));
    } finally {
      await file.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
