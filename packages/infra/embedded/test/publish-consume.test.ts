import type { Delivery, ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { providersClosedAfterEach, sleep, waitFor } from "./helpers.js";

const { create, connected } = providersClosedAfterEach();

async function rejection(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (error) {
    return error as ProviderError;
  }
  throw new Error("expected a rejection");
}

describe("lifecycle", () => {
  it("connects and closes idempotently and refuses use before connect and after close", async () => {
    const provider = create();
    const early = await rejection(provider.publish("/queue/a", { body: 1 }));
    expect(early.code).toBe("provider_not_connected");
    await Promise.all([provider.connect(), provider.connect()]);
    await provider.publish("/queue/a", { body: 1 });
    await Promise.all([provider.close(), provider.close()]);
    const late = await rejection(provider.publish("/queue/a", { body: 1 }));
    expect(late.code).toBe("provider_closed");
    expect(late.message).toContain("[factflow/embedded]");
    expect((await rejection(provider.admin.stats({ destination: "/queue/a" }))).code).toBe("provider_closed");
    expect((await rejection(provider.connect())).code).toBe("provider_closed");
  });

  it("closes an unconnected provider", async () => {
    const provider = create();
    await provider.close();
    expect(provider.counters().published).toBe(0);
  });
});

describe("queues", () => {
  it("delivers the envelope the publisher described, with attempt 1 and a private body", async () => {
    const p = await connected();
    const seen: Delivery[] = [];
    await p.subscribe(
      "/queue/orders",
      (d) => {
        seen.push(d);
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s" },
    );
    const body = { order: 7, lines: [1, 2] };
    const receipt = await p.publish("/queue/orders", {
      body,
      headers: { "x-user": "u" },
      correlationId: "corr-1",
      executionId: "exec-1",
      traceparent: "00-abc-def-01",
      priority: 5,
    });
    body.order = 8;
    await waitFor(() => seen.length === 1, "the delivery");
    const d = seen[0] as Delivery;
    expect(d.message.id).toBe(receipt.id);
    expect(d.message.body).toEqual({ order: 7, lines: [1, 2] });
    expect(d.message.correlationId).toBe("corr-1");
    expect(d.message.executionId).toBe("exec-1");
    expect(d.message.traceparent).toBe("00-abc-def-01");
    expect(d.message.priority).toBe(5);
    expect(d.message.headers).toMatchObject({
      "x-user": "u",
      "x-delivery-attempt": "1",
      "x-message-id": receipt.id,
      "x-correlation-id": "corr-1",
      "x-execution-id": "exec-1",
    });
    expect(d.attempt).toBe(1);
    expect(d.redelivered).toBe(false);
    expect(d.destination).toBe("/queue/orders");
    expect(d.subscription).toBe("s");
    await waitFor(() => p.counters().acked === 1, "the ack");
  });

  it("shares a queue between competing consumers, each message exactly once", async () => {
    const p = await connected();
    const byConsumer: Record<string, number[]> = { a: [], b: [] };
    for (const name of ["a", "b"] as const) {
      await p.subscribe(
        "/queue/work",
        async (d) => {
          byConsumer[name]?.push((d.message.body as { n: number }).n);
          await sleep(1);
          return "ACKNOWLEDGED" as const;
        },
        { subscription: name, concurrency: 2 },
      );
    }
    await Promise.all(Array.from({ length: 100 }, (_, n) => p.publish("/queue/work", { body: { n } })));
    await waitFor(() => (byConsumer.a?.length ?? 0) + (byConsumer.b?.length ?? 0) === 100, "100 deliveries");
    const all = [...(byConsumer.a ?? []), ...(byConsumer.b ?? [])].sort((x, y) => x - y);
    expect(all).toEqual(Array.from({ length: 100 }, (_, n) => n));
    expect(byConsumer.a?.length).toBeGreaterThan(10);
    expect(byConsumer.b?.length).toBeGreaterThan(10);
  });

  it("never runs more handlers than min(prefetch, concurrency)", async () => {
    const p = await connected();
    // A queue definition's prefetch can sit below a subscriber's concurrency.
    await p.defineQueue("/queue/c2", { prefetch: 2 });
    for (const [queue, options, bound] of [
      ["/queue/c1", { prefetch: 10, concurrency: 3 }, 3],
      ["/queue/c2", { concurrency: 8 }, 2],
    ] as const) {
      let running = 0;
      let peak = 0;
      let done = 0;
      await p.subscribe(
        queue,
        async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(5);
          running--;
          done++;
          return "ACKNOWLEDGED" as const;
        },
        { subscription: "s", ...options },
      );
      await Promise.all(Array.from({ length: 30 }, () => p.publish(queue, { body: null })));
      expect((await p.admin.stats({ destination: queue })).inFlight).toBeLessThanOrEqual(bound);
      await waitFor(() => done === 30, "30 handled");
      expect(peak).toBe(bound);
    }
  });

  it("keeps messages published before anyone subscribes", async () => {
    const p = await connected();
    await p.publish("/queue/early", { body: "x" });
    expect((await p.admin.stats({ destination: "/queue/early" })).depth).toBe(1);
    const got: unknown[] = [];
    await p.subscribe(
      "/queue/early",
      (d) => {
        got.push(d.message.body);
        return "ACKNOWLEDGED" as const;
      },
      {
        subscription: "s",
      },
    );
    await waitFor(() => got.length === 1, "the early message");
  });
});

describe("topics", () => {
  it("gives every subscription name its own copy, and same-name consumers compete", async () => {
    const p = await connected();
    const got: Record<string, number> = { a1: 0, a2: 0, b: 0 };
    const count = (k: string) => () => {
      got[k] = (got[k] ?? 0) + 1;
      return "ACKNOWLEDGED" as const;
    };
    await p.subscribe("/topic/news", count("a1"), { subscription: "a" });
    await p.subscribe("/topic/news", count("a2"), { subscription: "a" });
    await p.subscribe("/topic/news", count("b"), { subscription: "b" });
    for (let i = 0; i < 20; i++) await p.publish("/topic/news", { body: i });
    await waitFor(() => (got.a1 ?? 0) + (got.a2 ?? 0) === 20 && got.b === 20, "both subscriptions served");
    expect(got.a1).toBeGreaterThan(0);
    expect(got.a2).toBeGreaterThan(0);
    await sleep(50);
    expect((got.a1 ?? 0) + (got.a2 ?? 0)).toBe(20);
    expect(got.b).toBe(20);
  });
});

describe("bad input", () => {
  it("rejects invalid destinations, non-JSON bodies and oversized messages with clear errors, losing nothing", async () => {
    const p = create({ maxMessageBytes: 1_000 });
    await p.connect();
    await p.publish("/queue/ok", { body: 1 });
    const cases: [Promise<unknown>, string][] = [
      [p.publish("orders", { body: 1 }), "invalid_destination"],
      [p.publish("/queue/has space", { body: 1 }), "invalid_destination"],
      [p.publish("/queue/", { body: 1 }), "invalid_destination"],
      [p.publish("/queue/ok", { body: { when: new Date() } as never }), "invalid_message"],
      [p.publish("/queue/ok", { body: { n: Number.NaN } }), "invalid_message"],
      [p.publish("/queue/ok", { body: { f: () => 1 } as never }), "invalid_message"],
      [p.publish("/queue/ok", { body: 1, headers: { h: 1 as never } }), "invalid_message"],
      [p.publish("/queue/ok", { body: 1, priority: 12 }), "invalid_message"],
      [p.publish("/queue/ok", { body: "x".repeat(2_000) }), "message_too_large"],
      [p.subscribe("/queue/ok", () => "ACKNOWLEDGED", { subscription: "bad name!" }), "invalid_destination"],
      [
        p.subscribe("/queue/ok", () => "ACKNOWLEDGED", { subscription: "s", prefetch: 0 }),
        "invalid_argument",
      ],
    ];
    for (const [promise, code] of cases) {
      const error = await rejection(promise);
      expect(error.code, error.message).toBe(code);
      expect(error.reason).toBe("invalid-input");
      expect(error.message).toMatch(/^\[factflow\/embedded\] /);
    }
    const stats = await p.admin.stats({ destination: "/queue/ok" });
    expect(stats.depth).toBe(1);
    expect(p.counters().published).toBe(1);
  });
});

describe("settleAfter", () => {
  it("gives the handler's slot to the next delivery while the first waits to be settled, beyond the prefetch", async () => {
    const p = await connected();
    let commit: () => void = () => {};
    const committed = new Promise<void>((resolve) => {
      commit = resolve;
    });
    const started: number[] = [];
    await p.subscribe(
      "/queue/settle-after",
      (d) => {
        const n = d.message.body as number;
        started.push(n);
        return { status: "ACKNOWLEDGED" as const, settleAfter: committed };
      },
      { subscription: "s", concurrency: 1, prefetch: 2 },
    );
    for (const n of [1, 2, 3]) await p.publish("/queue/settle-after", { body: n });
    // One handler at a time, but each runs while the ones before it await their settleAfter, which
    // in this process do not count against the prefetch of 2.
    await waitFor(() => started.length === 3, "the third delivery to start");
    expect(started).toEqual([1, 2, 3]);
    expect(p.counters().acked).toBe(0);
    commit();
    await waitFor(() => p.counters().acked === 3, "all three to be acknowledged");
  });

  it("keeps the slot of a handler that returns a settleAfter after its timeout already settled it", async () => {
    const p = await connected();
    let lateReturned = false;
    const started: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await p.subscribe(
      "/queue/late-settle-after",
      async (d, signal) => {
        const body = d.message.body as string;
        if (body === "slow" && d.attempt === 1) {
          // Ignores its deadline, then returns late with a commit to wait for (one that never ends).
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
          lateReturned = true;
          return { status: "ACKNOWLEDGED" as const, settleAfter: new Promise<void>(() => {}) };
        }
        started.push(body);
        if (body === "first") await gate;
        return "ACKNOWLEDGED" as const;
      },
      {
        subscription: "s",
        concurrency: 1,
        prefetch: 1,
        handlerTimeoutMs: 20,
        retry: { maxAttempts: 3, initialDelayMs: 1 },
      },
    );
    await p.publish("/queue/late-settle-after", { body: "slow" });
    await waitFor(
      () => lateReturned && started.includes("slow"),
      "the timed-out delivery to return late and run again",
    );
    await p.publish("/queue/late-settle-after", { body: "first" });
    await p.publish("/queue/late-settle-after", { body: "second" });
    await waitFor(() => started.includes("first"), "the first delivery to start");
    await new Promise((resolve) => setImmediate(resolve));
    // One handler at a time: the late result must not have handed out a second slot.
    expect(started).toEqual(["slow", "first"]);
    release();
    await waitFor(() => started.includes("second"), "the second delivery to start");
    expect(p.counters().superseded).toBe(1);
  });

  it("settles a delivery waiting for its settleAfter when the subscription stops, instead of handing it back", async () => {
    const p = await connected();
    let commit: () => void = () => {};
    const committed = new Promise<void>((resolve) => {
      commit = resolve;
    });
    let runs = 0;
    const subscription = await p.subscribe(
      "/queue/settle-on-stop",
      () => {
        runs++;
        return { status: "ACKNOWLEDGED" as const, settleAfter: committed };
      },
      { subscription: "s" },
    );
    await p.publish("/queue/settle-on-stop", { body: 1 });
    await waitFor(() => runs === 1, "the delivery to run");
    await subscription.unsubscribe();
    commit();
    await waitFor(() => p.counters().acked === 1, "the acknowledgement after the commit");
    expect(p.counters().redelivered).toBe(0);
    expect((await p.admin.stats({ destination: "/queue/settle-on-stop" })).depth).toBe(0);
  });
});
