import { performance } from "node:perf_hooks";
import { afterAll, describe, expect, it } from "vitest";
import { createEmbeddedProvider } from "../src/index.js";

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
