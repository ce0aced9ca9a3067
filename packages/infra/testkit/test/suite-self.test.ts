import { type AddressInfo, createServer } from "node:net";
import type { Delivery } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { collectDeliveries } from "../src/collect-deliveries.js";
import { isKnownProvider, PROVIDER_EXPECTATIONS } from "../src/known-providers.js";
import { type ConformanceOptions, DEFAULT_TIMING, resolveOptions } from "../src/options.js";
import { probeTcp } from "../src/probe-tcp.js";
import { GROUPS, SuiteReport } from "../src/report.js";
import { planForUnavailable } from "../src/run-conformance-suite.js";
import { waitFor } from "../src/wait-for.js";

function delivery(id: string, attempt = 1): Delivery {
  return {
    message: {
      id,
      body: { id },
      headers: { "x-delivery-attempt": String(attempt) },
      correlationId: id,
      publishedAt: new Date().toISOString(),
    },
    destination: "/queue/self-test",
    subscription: "self",
    attempt,
    redelivered: attempt > 1,
  };
}

describe("waitFor", () => {
  it("resolves with the first truthy value", async () => {
    let calls = 0;
    const value = await waitFor(() => (++calls >= 3 ? `done after ${calls}` : undefined), { intervalMs: 1 });
    expect(value).toBe("done after 3");
  });

  it("times out naming what it waited for and the last error", async () => {
    await expect(
      waitFor(
        () => {
          throw new Error("broker says no");
        },
        { timeoutMs: 50, intervalMs: 5, description: () => "the answer" },
      ),
    ).rejects.toThrow(/timed out after 50 ms waiting for the answer \(last error: Error: broker says no\)/);
  });
});

describe("probeTcp", () => {
  it("is ok for a listening port and explains a closed one", async () => {
    const server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    expect(await probeTcp("127.0.0.1", port, 1000)).toEqual({ ok: true });
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const closed = await probeTcp("127.0.0.1", port, 1000);
    expect(closed.ok).toBe(false);
    expect(closed.ok ? "" : closed.reason).toContain(`127.0.0.1:${port}`);
  });
});

describe("collectDeliveries", () => {
  it("records deliveries, outcomes, concurrency and duplicates", async () => {
    const recorder = collectDeliveries((d, _signal, previous) => {
      if (d.message.id === "boom") throw new Error("handler crashed");
      return previous === 0 ? "FAILED" : "ACKNOWLEDGED";
    });
    const signal = new AbortController().signal;
    await Promise.all([recorder.handler(delivery("a"), signal), recorder.handler(delivery("b"), signal)]);
    expect(await recorder.handler(delivery("a", 2), signal)).toBe("ACKNOWLEDGED");
    await expect(recorder.handler(delivery("boom"), signal)).rejects.toThrow("handler crashed");
    expect(recorder.deliveries.map((d) => [d.id, d.attempt, d.outcome])).toEqual([
      ["a", 1, "FAILED"],
      ["b", 1, "FAILED"],
      ["a", 2, "ACKNOWLEDGED"],
      ["boom", 1, "threw"],
    ]);
    expect(recorder.ids()).toEqual(["a", "b", "boom"]);
    expect(recorder.count("a")).toBe(2);
    expect(recorder.duplicates()).toEqual(new Map([["a", 2]]));
    expect(recorder.maxActive()).toBe(2);
    expect(recorder.active()).toBe(0);
    await recorder.waitForIds(["a"], { status: "ACKNOWLEDGED", timeoutMs: 100 });
    await expect(recorder.waitForIds(["b"], { status: "ACKNOWLEDGED", timeoutMs: 50 })).rejects.toThrow(
      /missing 1/,
    );
  });
});

describe("provider expectations and options", () => {
  it("has an entry for every known provider and refuses an unknown one without expectations", () => {
    for (const name of ["embedded", "rabbitmq", "artemis", "pulsar"])
      expect(isKnownProvider(name)).toBe(true);
    expect(isKnownProvider("toString")).toBe(false);
    const base = {
      createProvider: () => {
        throw new Error("not called");
      },
      available: { ok: true } as const,
      faults: { kind: "none", reason: "self test" } as const,
    };
    // @ts-expect-error -- "kafka" is not a KnownProvider, so it does not compile without expectations.
    const unknownWithout: ConformanceOptions = { ...base, name: "kafka" };
    expect(() => resolveOptions(unknownWithout)).toThrow(/pass `expectations`/);
    const custom = resolveOptions({ ...base, name: "kafka", expectations: PROVIDER_EXPECTATIONS.rabbitmq });
    expect(custom.expectations).toEqual(PROVIDER_EXPECTATIONS.rabbitmq);
    const known = resolveOptions({ ...base, name: "embedded", timing: { quietPeriodMs: 50 } });
    expect(known.expectations).toEqual(PROVIDER_EXPECTATIONS.embedded);
    expect(known.timing).toEqual({ ...DEFAULT_TIMING, quietPeriodMs: 50 });
  });
});

describe("SuiteReport", () => {
  it("renders one row per group with the reasons groups did not run", () => {
    const report = new SuiteReport("embedded");
    report.passed("lifecycle");
    report.failed("queues");
    report.notRun("ordering: priorities", "capabilities.priorities is false");
    report.note("2 duplicates");
    const text = report.render();
    const lines = text.split("\n");
    expect(lines).toHaveLength(3 + GROUPS.length + 1);
    expect(lines.find((l) => l.startsWith("lifecycle"))).toMatch(/passed\s+1\s+0\s+0/);
    expect(lines.find((l) => l.startsWith("queues"))).toMatch(/FAILED/);
    expect(lines.find((l) => l.startsWith("ordering: priorities"))).toMatch(
      /not run.*capabilities\.priorities is false/,
    );
    expect(text).toContain("note: 2 duplicates");
  });
});

describe("planForUnavailable", () => {
  it("runs when available, skips with the reason, and fails when services are required", () => {
    expect(planForUnavailable("rabbitmq", { ok: true }, true)).toEqual({ kind: "run" });
    expect(planForUnavailable("rabbitmq", { ok: false, reason: "ECONNREFUSED" }, false)).toEqual({
      kind: "skip",
      reason: "rabbitmq is not available: ECONNREFUSED",
    });
    const fail = planForUnavailable("rabbitmq", { ok: false, reason: "ECONNREFUSED" }, true);
    expect(fail.kind).toBe("fail");
    expect(fail.kind === "fail" ? fail.message : "").toMatch(/ECONNREFUSED.*FACTFLOW_REQUIRE_SERVICES=1/);
  });
});
