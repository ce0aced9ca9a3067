import type { Delivery, MessageStatus } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { providersClosedAfterEach, sleep, waitFor } from "./helpers.js";

const { connected } = providersClosedAfterEach();

const fast = { maxAttempts: 3, initialDelayMs: 40, multiplier: 2, maxDelayMs: 1_000 };

describe("FAILED", () => {
  it("retries with the attempt header incremented after exponential delays, then dead-letters", async () => {
    const p = await connected();
    const seen: { attempt: number; header: string | undefined; at: number; lastError: string | undefined }[] =
      [];
    await p.subscribe(
      "/queue/r",
      (d) => {
        seen.push({
          attempt: d.attempt,
          header: d.message.headers["x-delivery-attempt"],
          at: Date.now(),
          lastError: d.message.headers["x-last-error"],
        });
        return { status: "FAILED", reason: `boom ${d.attempt}` };
      },
      { subscription: "s", retry: fast },
    );
    const { id } = await p.publish("/queue/r", { body: { x: 1 } });
    await waitFor(() => p.counters().deadLettered === 1, "the dead letter");
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(seen.map((s) => s.header)).toEqual(["1", "2", "3"]);
    expect(seen.map((s) => s.lastError)).toEqual([undefined, "boom 1", "boom 2"]);
    const gap1 = (seen[1]?.at ?? 0) - (seen[0]?.at ?? 0);
    const gap2 = (seen[2]?.at ?? 0) - (seen[1]?.at ?? 0);
    expect(gap1).toBeGreaterThanOrEqual(38);
    expect(gap2).toBeGreaterThanOrEqual(78);
    // Lower bounds only (a busy machine may be late, never early); the gaps are printed.
    console.log(`[factflow/embedded] retry gaps ${gap1} ms and ${gap2} ms (expected about 40 and 80)`);
    const page = await p.admin.browseDeadLetters({ destination: "/queue/r" }, { offset: 0, limit: 10 });
    expect(page.total).toBe(1);
    const letter = page.items[0];
    expect(letter?.message.id).toBe(id);
    expect(letter?.reason).toBe("exhausted");
    expect(letter?.attempts).toBe(3);
    expect(letter?.lastError).toBe("boom 3");
    expect(letter?.message.headers).toMatchObject({
      "x-dead-letter-reason": "exhausted",
      "x-last-error": "boom 3",
      "x-original-destination": "/queue/r",
    });
    expect(p.counters()).toMatchObject({ retried: 2, deadLettered: 1, acked: 0 });
  });

  it("REJECTED dead-letters at once", async () => {
    const p = await connected();
    let calls = 0;
    await p.subscribe(
      "/queue/rej",
      () => {
        calls++;
        return "REJECTED" as const;
      },
      { subscription: "s", retry: fast },
    );
    await p.publish("/queue/rej", { body: 1 });
    await waitFor(() => p.counters().deadLettered === 1, "the dead letter");
    await sleep(150);
    expect(calls).toBe(1);
    const page = await p.admin.browseDeadLetters({ destination: "/queue/rej" }, { offset: 0, limit: 10 });
    expect(page.items[0]?.reason).toBe("rejected");
    expect(page.items[0]?.attempts).toBe(1);
  });
});

describe("incomplete handlers", () => {
  for (const [label, behave] of [
    ["a thrown error", () => Promise.reject(new Error("kaput"))],
    ["an internal status", () => "PENDING" as MessageStatus],
    ["a garbage value", () => 42 as unknown as MessageStatus],
  ] as const) {
    it(`redelivers after ${label}, counting the attempt`, async () => {
      const p = await connected();
      const seen: Delivery[] = [];
      await p.subscribe(
        "/queue/inc",
        (d) => {
          seen.push(d);
          return seen.length === 1 ? behave() : "ACKNOWLEDGED";
        },
        { subscription: "s", retry: fast },
      );
      await p.publish("/queue/inc", { body: 1 });
      await waitFor(() => p.counters().acked === 1, "the second delivery acked");
      expect(seen.map((d) => d.attempt)).toEqual([1, 2]);
      expect(seen[1]?.redelivered).toBe(true);
      expect(seen[1]?.message.headers["x-last-error"]).toBeTruthy();
      expect(p.counters().redelivered).toBe(1);
    });
  }

  it("dead-letters a handler that never completes once the budget is spent", async () => {
    const p = await connected();
    let calls = 0;
    await p.subscribe(
      "/queue/loop",
      () => {
        calls++;
        throw new Error("always");
      },
      { subscription: "s", retry: { ...fast, initialDelayMs: 5 } },
    );
    await p.publish("/queue/loop", { body: 1 });
    await waitFor(() => p.counters().deadLettered === 1, "the dead letter");
    expect(calls).toBe(3);
    const page = await p.admin.browseDeadLetters({ destination: "/queue/loop" }, { offset: 0, limit: 1 });
    expect(page.items[0]?.reason).toBe("incomplete");
    expect(page.items[0]?.lastError).toContain("always");
  });

  it("aborts a handler that exceeds its timeout and redelivers the message", async () => {
    const p = await connected();
    const signals: AbortSignal[] = [];
    await p.subscribe(
      "/queue/slow",
      async (_d, signal) => {
        signals.push(signal);
        if (signals.length === 1) await new Promise((resolve) => signal.addEventListener("abort", resolve));
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s", handlerTimeoutMs: 50, retry: fast },
    );
    await p.publish("/queue/slow", { body: 1 });
    await waitFor(() => p.counters().acked === 1, "the redelivery acked");
    expect(signals[0]?.aborted).toBe(true);
    expect(String(signals[0]?.reason)).toContain("timed out");
    expect(signals.length).toBe(2);
    expect(p.counters().superseded).toBe(1);
  });

  it("returns an in-flight message when its subscription closes, without consuming an attempt", async () => {
    const p = await connected();
    let signal: AbortSignal | undefined;
    const first = await p.subscribe(
      "/queue/handoff",
      async (_d, s) => {
        signal = s;
        await new Promise((resolve) => s.addEventListener("abort", resolve));
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "first" },
    );
    await p.publish("/queue/handoff", { body: "m" });
    await waitFor(() => signal !== undefined, "the first delivery");
    expect((await p.admin.stats({ destination: "/queue/handoff" })).inFlight).toBe(1);
    await first.unsubscribe();
    expect(signal?.aborted).toBe(true);
    expect((await p.admin.stats({ destination: "/queue/handoff" })).depth).toBe(1);
    const again: Delivery[] = [];
    await p.subscribe(
      "/queue/handoff",
      (d) => {
        again.push(d);
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "second" },
    );
    await waitFor(() => again.length === 1, "the redelivery");
    expect(again[0]?.attempt).toBe(1);
    expect(again[0]?.redelivered).toBe(true);
    // The handler's answer is seen before the provider settles it: wait for the ack to be counted.
    await waitFor(() => p.counters().acked >= 1, "the redelivery's ack");
    expect(p.counters()).toMatchObject({ acked: 1, redelivered: 1 });
  });

  it("aborts handlers when the provider closes", async () => {
    const p = await connected();
    let signal: AbortSignal | undefined;
    await p.subscribe(
      "/queue/closing",
      async (_d, s) => {
        signal = s;
        await new Promise((resolve) => s.addEventListener("abort", resolve));
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s" },
    );
    await p.publish("/queue/closing", { body: 1 });
    await waitFor(() => signal !== undefined, "the delivery");
    await p.close();
    expect(signal?.aborted).toBe(true);
  });
});

describe("topic failures", () => {
  it("dead-letters a failed topic delivery for that subscription only, once, without touching the others", async () => {
    const p = await connected();
    let failing = 0;
    let healthy = 0;
    await p.subscribe(
      "/topic/t",
      () => {
        failing++;
        return "FAILED" as const;
      },
      { subscription: "bad", retry: fast },
    );
    await p.subscribe(
      "/topic/t",
      () => {
        healthy++;
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "good", retry: fast },
    );
    const { id } = await p.publish("/topic/t", { body: 1 });
    await waitFor(() => p.counters().deadLettered === 1 && healthy === 1, "the topic outcome");
    await sleep(200);
    expect(failing).toBe(1);
    expect(healthy).toBe(1);
    const bad = await p.admin.browseDeadLetters(
      { destination: "/topic/t", subscription: "bad" },
      { offset: 0, limit: 5 },
    );
    expect(
      bad.items.map((l) => [l.message.id, l.reason, l.message.headers["x-original-subscription"]]),
    ).toEqual([[id, "topic-failure", "bad"]]);
    const good = await p.admin.stats({ destination: "/topic/t", subscription: "good" });
    expect(good).toMatchObject({ depth: 0, dlqDepth: 0, inFlight: 0 });
    // Redriving goes back to the failed subscription alone.
    expect(await p.admin.redriveAll({ destination: "/topic/t", subscription: "bad" })).toEqual({
      redriven: 1,
    });
    await waitFor(() => failing === 2, "the redriven delivery");
    await sleep(100);
    expect(healthy).toBe(1);
  });
});

describe("one-parameter handlers", () => {
  it("share one signal per subscription that still fires on unsubscribe, and time out into a redelivery", async () => {
    const p = await connected();
    const seen: Delivery[] = [];
    let release: (() => void) | undefined;
    const sub = await p.subscribe(
      "/queue/one",
      (d) => {
        seen.push(d);
        return new Promise<MessageStatus>((resolve) => {
          release = () => resolve("ACKNOWLEDGED");
        });
      },
      { subscription: "s", handlerTimeoutMs: 40, retry: fast },
    );
    await p.publish("/queue/one", { body: 1 });
    await waitFor(() => seen.length === 2, "a redelivery after the timeout");
    expect(seen[1]?.attempt).toBe(2);
    await sub.unsubscribe();
    release?.();
    await sleep(10);
    expect(p.counters().acked).toBe(0);
    expect((await p.admin.stats({ destination: "/queue/one" })).depth).toBe(1);
  });
});

describe("handlers that release their signal (releasesSignal)", () => {
  it("get a settled delivery's signal again, unless it was aborted or still has a listener", async () => {
    const p = await connected();
    const signals: AbortSignal[] = [];
    await p.subscribe(
      "/queue/reuse",
      async (d, signal) => {
        signals.push(signal);
        const body = d.message.body as { keep?: boolean; hang?: boolean };
        // A listener left behind: this signal must not reach another delivery.
        if (body.keep) signal.addEventListener("abort", () => {});
        if (body.hang && d.attempt === 1)
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return "ACKNOWLEDGED" as const;
      },
      { subscription: "s", releasesSignal: true, handlerTimeoutMs: 50, retry: fast },
    );
    const send = async (body: Record<string, boolean>, acked: number) => {
      await p.publish("/queue/reuse", { body });
      await waitFor(() => p.counters().acked === acked, `delivery ${acked} acked`);
    };
    await send({}, 1);
    await send({}, 2);
    // Settled without a listener: the second delivery got the first one's signal.
    expect(signals[1]).toBe(signals[0]);
    await send({ keep: true }, 3);
    await send({}, 4);
    expect(signals[3]).not.toBe(signals[2]);
    // The fifth delivery reuses the fourth one's signal, and times out: an aborted signal is not
    // handed out again, so its redelivery gets a fresh one.
    await send({ hang: true }, 5);
    expect(signals[4]).toBe(signals[3]);
    expect(signals[4]?.aborted).toBe(true);
    expect(signals[5]).not.toBe(signals[4]);
    expect(signals[5]?.aborted).toBe(false);
    // The signal kept with a listener was never aborted by anyone else's delivery.
    expect(signals[2]?.aborted).toBe(false);
  });

  it("refuses a value that is not a boolean", async () => {
    const p = await connected();
    await expect(
      p.subscribe("/queue/reuse", () => "ACKNOWLEDGED" as const, {
        subscription: "s",
        releasesSignal: "yes" as unknown as boolean,
      }),
    ).rejects.toThrow(/releasesSignal must be true or false/);
  });
});
