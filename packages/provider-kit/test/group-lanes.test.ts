import { getEventListeners } from "node:events";
import { type Delivery, type HandlerResult, MessageStatus } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  GROUP_LANE_WINDOW,
  groupedSubscription,
  groupKeyOf,
  NO_GROUP_KEY,
  resolveSubscribeOptions,
} from "../src/index.js";

const CAPS = { fifo: true, messageGroups: true, priorities: true, orderedGroups: true };

function delivery(n: number, key: string, attempt = 1): Delivery {
  return {
    message: {
      id: `m${n}`,
      body: { order: { customer: key }, n },
      headers: { "x-key": key },
      correlationId: `m${n}`,
      publishedAt: new Date(0).toISOString(),
    },
    destination: "/queue/q",
    subscription: "s",
    attempt,
    redelivered: false,
  };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(check()).toBe(true);
}

describe("groupKeyOf", () => {
  it("reads a dotted body path or a header; a missing value is a group of its own", () => {
    const d = delivery(1, "c1");
    expect(groupKeyOf(d.message, { groupBy: "order.customer" })).toBe("c1");
    expect(groupKeyOf(d.message, { groupByHeader: "x-key" })).toBe("c1");
    expect(groupKeyOf(d.message, { groupBy: "n" })).toBe("1");
    expect(groupKeyOf(d.message, { groupBy: "order.missing" })).toBe(NO_GROUP_KEY);
  });
});

describe("groupedSubscription", () => {
  const options = resolveSubscribeOptions(
    {
      subscription: "s",
      ordering: "fifo",
      groupBy: "order.customer",
      concurrency: 2,
      prefetch: 20,
      retry: { maxAttempts: 3, initialDelayMs: 5, multiplier: 1 },
    },
    CAPS,
  );

  it("hands the provider every prefetched delivery, one attempt and the longest timeout", () => {
    const plan = groupedSubscription(() => MessageStatus.ACKNOWLEDGED, options);
    expect(plan.options.concurrency).toBe(GROUP_LANE_WINDOW);
    expect(plan.options.prefetch).toBe(GROUP_LANE_WINDOW);
    expect(plan.options.retry.maxAttempts).toBe(1);
    expect(plan.options.handlerTimeoutMs).toBeGreaterThan(options.handlerTimeoutMs);
  });

  it("retries in place: a failing message holds its group while other groups proceed", async () => {
    const seen: string[] = [];
    let failOnce = true;
    const plan = groupedSubscription((d) => {
      seen.push(`${d.message.id}@${d.attempt}`);
      if (d.message.id === "m1" && failOnce) {
        failOnce = false;
        return MessageStatus.FAILED;
      }
      return MessageStatus.ACKNOWLEDGED;
    }, options);
    const signal = new AbortController().signal;
    const results: Promise<HandlerResult>[] = [];
    results.push(Promise.resolve(plan.handler(delivery(1, "a"), signal)));
    results.push(Promise.resolve(plan.handler(delivery(2, "a"), signal)));
    results.push(Promise.resolve(plan.handler(delivery(3, "b"), signal)));
    expect(await Promise.all(results)).toEqual([
      MessageStatus.ACKNOWLEDGED,
      MessageStatus.ACKNOWLEDGED,
      MessageStatus.ACKNOWLEDGED,
    ]);
    const ofA = seen.filter((s) => s.startsWith("m1") || s.startsWith("m2"));
    expect(ofA).toEqual(["m1@1", "m1@2", "m2@1"]);
    expect(seen.indexOf("m3@1")).toBeLessThan(seen.indexOf("m1@2"));
  });

  it("dead-letters after the budget, or drops with deadLetter: false", async () => {
    const plan = groupedSubscription(() => MessageStatus.FAILED, options);
    const result = await plan.handler(delivery(1, "a"), new AbortController().signal);
    expect(result).toEqual({ status: MessageStatus.FAILED, reason: "handler returned FAILED" });
    const dropping = groupedSubscription(() => MessageStatus.FAILED, { ...options, deadLetter: false });
    expect(await dropping.handler(delivery(2, "a"), new AbortController().signal)).toBe(
      MessageStatus.ACKNOWLEDGED,
    );
  });

  it("never runs more than `concurrency` handlers, nor two of one group", async () => {
    let active = 0;
    let peak = 0;
    const perKey = new Map<string, number>();
    let overlap = false;
    const plan = groupedSubscription(async (d) => {
      const key = String((d.message.body as { order: { customer: string } }).order.customer);
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
      if ((perKey.get(key) ?? 0) > 1) overlap = true;
      active++;
      peak = Math.max(peak, active);
      await new Promise((r) => setTimeout(r, 2));
      active--;
      perKey.set(key, (perKey.get(key) ?? 1) - 1);
      return MessageStatus.ACKNOWLEDGED;
    }, options);
    const signal = new AbortController().signal;
    await Promise.all(Array.from({ length: 30 }, (_, n) => plan.handler(delivery(n, `k${n % 4}`), signal)));
    expect(peak).toBe(2);
    expect(overlap).toBe(false);
  });

  it("a stop aborts waiting and running work at once", async () => {
    const plan = groupedSubscription(
      (_d, signal) =>
        new Promise<HandlerResult>((r) => signal.addEventListener("abort", () => r("ACKNOWLEDGED"))),
      options,
    );
    const stop = new AbortController();
    const first = plan.handler(delivery(1, "a"), stop.signal);
    const second = plan.handler(delivery(2, "a"), stop.signal);
    let settled = 0;
    void Promise.all([first, second]).then(() => settled++);
    stop.abort(new Error("unsubscribed"));
    await until(() => settled === 1);
    expect(await second).toBe(MessageStatus.PENDING);
  });
});

describe("groupedSubscription and released signals", () => {
  it("times each attempt out with the caller's timeout, and leaves no listener on a settled delivery's signal", async () => {
    const options = resolveSubscribeOptions(
      {
        subscription: "s",
        ordering: "fifo",
        groupBy: "order.customer",
        releasesSignal: true,
        handlerTimeoutMs: 30,
        retry: { maxAttempts: 2, initialDelayMs: 5, multiplier: 1 },
      },
      CAPS,
    );
    const handed: AbortSignal[] = [];
    const plan = groupedSubscription((d, signal) => {
      handed.push(signal);
      // The first attempt ignores its signal: only the timeout ends it.
      return d.attempt === 1 ? new Promise<never>(() => {}) : MessageStatus.ACKNOWLEDGED;
    }, options);
    const provider = new AbortController();
    expect(await plan.handler(delivery(1, "a"), provider.signal)).toBe(MessageStatus.ACKNOWLEDGED);
    expect(handed).toHaveLength(2);
    expect(handed[0]?.aborted).toBe(true);
    // The timed-out attempt's signal is not handed out again; the retry got a live one.
    expect(handed[1]).not.toBe(handed[0]);
    expect(handed[1]?.aborted).toBe(false);
    expect(getEventListeners(provider.signal, "abort")).toHaveLength(0);
    // A settled, never-aborted attempt's signal serves the next one.
    expect(await plan.handler(delivery(2, "b", 2), provider.signal)).toBe(MessageStatus.ACKNOWLEDGED);
    expect(handed[2]).toBe(handed[1]);
  });
});

describe("deadLetter: false", () => {
  it("acknowledges what would be dead-lettered: REJECTED, or a failure on the last attempt", async () => {
    const { dropDeadLetters } = await import("../src/drop-dead-letters.js");
    const options = resolveSubscribeOptions(
      { subscription: "s", deadLetter: false, retry: { maxAttempts: 2 } },
      CAPS,
    );
    const signal = new AbortController().signal;
    const failing = dropDeadLetters(() => MessageStatus.FAILED, options);
    expect(await failing(delivery(1, "a", 1), signal)).toBe(MessageStatus.FAILED);
    expect(await failing(delivery(1, "a", 2), signal)).toBe(MessageStatus.ACKNOWLEDGED);
    const rejecting = dropDeadLetters(() => MessageStatus.REJECTED, options);
    expect(await rejecting(delivery(2, "a", 1), signal)).toBe(MessageStatus.ACKNOWLEDGED);
    const throwing = dropDeadLetters(() => {
      throw new Error("boom");
    }, options);
    await expect(Promise.resolve(throwing(delivery(3, "a", 1), signal))).rejects.toThrow("boom");
    expect(await throwing(delivery(3, "a", 2), signal)).toBe(MessageStatus.ACKNOWLEDGED);
    // The acknowledgement still waits for what the handler asked the provider to await.
    const settleAfter = Promise.resolve();
    const committing = dropDeadLetters(() => ({ status: MessageStatus.REJECTED, settleAfter }), options);
    expect(await committing(delivery(4, "a", 1), signal)).toEqual({
      status: MessageStatus.ACKNOWLEDGED,
      settleAfter,
    });
  });
});
