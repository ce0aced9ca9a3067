import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { MessageStatus, type SettledDelivery } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { meterProvider } from "../src/metered-provider.js";
import { FactflowMetrics } from "../src/metrics.js";

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("metrics (prom-client)", () => {
  it("meters deliveries per route: settlements, retries, handler time and queue wait", async () => {
    const metrics = new FactflowMetrics();
    const raw = createEmbeddedProvider({ mode: "memory" });
    await raw.connect();
    const provider = meterProvider(raw, metrics, () => ({ route: "parse", queue: "m.in" }));
    try {
      let calls = 0;
      await provider.subscribe(
        "/queue/m.in",
        async () => (++calls === 1 ? MessageStatus.FAILED : MessageStatus.ACKNOWLEDGED),
        { subscription: "metrics-test", retry: { maxAttempts: 3, initialDelayMs: 10 } },
      );
      await provider.publish("/queue/m.in", { body: { n: 1 } });
      await waitFor(
        async () => (await metrics.valueOf(metrics.messages, { status: "ACKNOWLEDGED" })) === 1,
        "the retried message to be acknowledged",
      );
      const text = await metrics.render();
      expect(text).toContain('factflow_messages_total{queue="m.in",route="parse",status="FAILED"} 1');
      expect(text).toContain('factflow_messages_total{queue="m.in",route="parse",status="ACKNOWLEDGED"} 1');
      expect(text).toContain('factflow_retries_total{route="parse"} 1');
      expect(text).toContain('factflow_handler_seconds_count{route="parse"} 2');
      // Only the first delivery measures queue wait; the retry's delay is not queue time.
      expect(text).toContain('factflow_queue_wait_seconds_count{route="parse"} 1');
      expect(text).toContain('factflow_messages_in_flight{route="parse"} 0');
      expect(await metrics.valueOf(metrics.retries, { route: "parse" })).toBe(1);
    } finally {
      await provider.close();
    }
  });

  it("counts a last attempt that throws or times out as a dead letter, from the provider's verdict", async () => {
    const metrics = new FactflowMetrics();
    const raw = createEmbeddedProvider({ mode: "memory" });
    await raw.connect();
    const provider = meterProvider(raw, metrics, (destination) => ({
      route: destination.endsWith("throws") ? "throws" : "hangs",
      queue: destination,
    }));
    const seen: SettledDelivery[] = [];
    try {
      await provider.subscribe(
        "/queue/m.throws",
        () => {
          throw new Error("boom");
        },
        {
          subscription: "metrics-throw",
          retry: { maxAttempts: 2, initialDelayMs: 1 },
          onSettled: (s) => seen.push(s),
        },
      );
      await provider.subscribe("/queue/m.hangs", (_delivery, _signal) => new Promise<never>(() => {}), {
        subscription: "metrics-timeout",
        retry: { maxAttempts: 1 },
        handlerTimeoutMs: 20,
        onSettled: (s) => seen.push(s),
      });
      await provider.publish("/queue/m.throws", { body: { n: 1 } });
      await provider.publish("/queue/m.hangs", { body: { n: 2 } });
      await waitFor(
        async () =>
          (await metrics.valueOf(metrics.deadLetters, { route: "throws" })) === 1 &&
          (await metrics.valueOf(metrics.deadLetters, { route: "hangs" })) === 1,
        "both messages to be dead-lettered",
      );
      // The first throw was retried (an incomplete attempt), the second dead-lettered `incomplete`.
      expect(await metrics.valueOf(metrics.retries, { route: "throws" })).toBe(1);
      expect(await metrics.valueOf(metrics.retries, { route: "hangs" })).toBe(0);
      expect(raw.counters().deadLettered).toBe(2);
      // The caller's own listener still hears every verdict.
      const kinds = seen.map((s) => `${s.subscription}:${s.kind}:${s.attempt}`).sort();
      expect(kinds).toEqual([
        "metrics-throw:dead-lettered:2",
        "metrics-throw:retried:1",
        "metrics-timeout:dead-lettered:1",
      ]);
      for (const s of seen.filter((e) => e.kind === "dead-lettered"))
        expect(s).toMatchObject({ reason: "incomplete", undecodable: false });
    } finally {
      await provider.close();
    }
  });

  it("renders collectors' families with sorted labels, read at scrape time", async () => {
    const metrics = new FactflowMetrics();
    let value = 1;
    metrics.addCollector({
      collect: () => [
        {
          name: "factflow_test_total",
          help: "A test family.",
          type: "counter",
          samples: [{ labels: { z: "1", a: "2" }, value }],
        },
      ],
    });
    expect(await metrics.render()).toContain('factflow_test_total{a="2",z="1"} 1');
    value = 5;
    expect(await metrics.render()).toContain('factflow_test_total{a="2",z="1"} 5');
    expect(await metrics.render()).toContain("# TYPE factflow_test_total counter");
  });
});
