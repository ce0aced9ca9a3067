import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { MessageStatus } from "@factflow/protocols";
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
