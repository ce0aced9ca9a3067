/**
 * Faults on a healthy-but-bad link, for networked brokers: a stalled connection and added latency.
 * The cut-connection stream lives in `faults.ts`.
 */
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { createFaultProxy } from "../fault-proxy.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { publishUntilTaken } from "./faults.js";
import { range } from "./util.js";

/** Settles to what `work` did, or `"hung"` if it did neither within `ms`. */
async function outcomeWithin(work: Promise<unknown>, ms: number): Promise<"resolved" | "rejected" | "hung"> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((resolve) => {
    timer = setTimeout(() => resolve("hung"), ms);
  });
  try {
    return await Promise.race([
      work.then(
        () => "resolved" as const,
        () => "rejected" as const,
      ),
      hung,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function registerStall(env: SuiteEnv): void {
  const faults = env.options.faults;
  defineTest(env, "faults", {
    title: "a stalled connection: publish settles instead of hanging, and the provider recovers after resume",
    timeoutMs: 60_000 + env.options.expectations.recoveryWithinMs * 3,
    notRunWhen: () => {
      if (faults.kind === "none") return faults.reason;
      if (faults.kind === "restart")
        return "faults.kind is restart: an in-process provider has no connection to stall";
      return undefined;
    },
    body: async (h) => {
      if (faults.kind !== "tcp") return;
      const proxy = await createFaultProxy({ target: faults.target });
      try {
        const provider = await h.provider({ host: proxy.host, port: proxy.port });
        const queue = h.queue("stall");
        const recorder = collectDeliveries();
        await h.subscribe(provider, queue, recorder.handler, { subscription: "stalled" });
        const { id: before } = await provider.publish(queue, { body: { when: "before" } });
        await recorder.waitForIds([before], { timeoutMs: h.timing.deliveryTimeoutMs });

        proxy.stall();
        const started = Date.now();
        const during = provider.publish(queue, { body: { when: "during" } });
        const outcome = await outcomeWithin(during, h.expectations.recoveryWithinMs);
        const tookMs = Date.now() - started;
        proxy.resume();
        h.note(`faults (stall): publish during a stall ${outcome} after ${tookMs} ms`);
        expect(outcome, "publish must resolve or reject, never hang").not.toBe("hung");
        if (outcome === "resolved") {
          const { id } = await during;
          await recorder.waitForIds([id], { timeoutMs: h.expectations.recoveryWithinMs });
        }
        const deadline = Date.now() + h.expectations.recoveryWithinMs;
        const afterId = `${h.env.runId}-after-stall`;
        await publishUntilTaken(() => provider, queue, afterId, 0, deadline);
        await recorder.waitForIds([afterId], { timeoutMs: h.expectations.recoveryWithinMs });
      } finally {
        await proxy.close();
      }
    },
  });
}

export function registerLatency(env: SuiteEnv): void {
  const faults = env.options.faults;
  defineTest(env, "faults", {
    title: "under 150 ms of added latency each way, messages flow and settle once",
    timeoutMs: 60_000 + env.options.expectations.recoveryWithinMs,
    notRunWhen: () => {
      if (faults.kind === "none") return faults.reason;
      if (faults.kind === "restart")
        return "faults.kind is restart: an in-process provider has no connection to slow down";
      return undefined;
    },
    body: async (h) => {
      if (faults.kind !== "tcp") return;
      const proxy = await createFaultProxy({ target: faults.target });
      try {
        proxy.delay(150);
        const provider = await h.provider({ host: proxy.host, port: proxy.port });
        const queue = h.queue("latency");
        const recorder = collectDeliveries();
        await h.subscribe(provider, queue, recorder.handler, {
          subscription: "slow-link",
          prefetch: 5,
          concurrency: 2,
        });
        const published = await Promise.all(range(20).map((n) => provider.publish(queue, { body: { n } })));
        const ids = published.map((r) => r.id);
        await recorder.waitForIds(ids, {
          status: "ACKNOWLEDGED",
          timeoutMs: h.expectations.recoveryWithinMs,
        });
        await h.quiet(600);
        expect(recorder.duplicates(), "no message delivered twice on a slow but healthy link").toEqual(
          new Map(),
        );
        await h.statsUntil(
          provider,
          { destination: queue },
          (s) => s.depth === 0 && s.inFlight === 0 && s.dlqDepth === 0,
          "an empty queue",
        );
      } finally {
        await proxy.close();
      }
    },
  });
}
