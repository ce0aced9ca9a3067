import { type DeadLetter, type DurabilityCounters, Headers, type QueueProtocol } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv, type TestHarness } from "../harness.js";
import { publishAll, range } from "./util.js";

export function registerSettlement(env: SuiteEnv): void {
  defineTest(env, "settlement", {
    title: "ACKNOWLEDGED settles: no redelivery, not even to a new consumer, and the queue is empty",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("ack");
      const recorder = collectDeliveries();
      const subscription = await h.subscribe(provider, queue, recorder.handler, { subscription: "acker" });
      const ids = await publishAll(
        provider,
        queue,
        range(5).map((n) => ({ n })),
      );
      await recorder.waitForIds(ids, { timeoutMs: h.timing.deliveryTimeoutMs, status: "ACKNOWLEDGED" });
      await subscription.unsubscribe();
      const late = collectDeliveries();
      await h.subscribe(provider, queue, late.handler, { subscription: "late" });
      await h.quiet();
      expect(recorder.deliveries.length).toBe(5);
      expect(late.deliveries.length, "acknowledged messages never come back").toBe(0);
      await h.statsUntil(
        provider,
        { destination: queue },
        (s) => s.depth === 0 && s.inFlight === 0 && s.dlqDepth === 0,
        "depth 0, in flight 0, dlq 0",
      );
      expectCounters(provider, {
        published: 5,
        confirmed: 5,
        acked: 5,
        retried: 0,
        deadLettered: 0,
        redelivered: 0,
        superseded: 0,
        lost: 0,
      });
    },
  });

  defineTest(env, "settlement", {
    title: "REJECTED dead-letters at once with reason rejected, after one attempt",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("reject");
      const recorder = collectDeliveries(() => ({
        status: "REJECTED",
        reason: "conformance: permanent failure",
      }));
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "rejecter",
        retry: { maxAttempts: 5, initialDelayMs: 50 },
      });
      const body = { order: 7, lines: ["a", "b"] };
      const { id } = await provider.publish(queue, { body, headers: { "x-conformance": "reject" } });
      const [letter] = await h.deadLettersUntil(provider, { destination: queue }, 1);
      await h.quiet();
      expect(recorder.count(id), "a rejected message is not retried").toBe(1);
      expectDeadLetter(letter, {
        id,
        body,
        reason: "rejected",
        attempts: 1,
        lastError: "conformance: permanent failure",
      });
      expect(letter!.message.headers["x-conformance"]).toBe("reject");
      await expectDlqDepth(h, provider, queue, 1);
      // The dead-letter copy is counted only as deadLettered: not published, and settling the original
      // behind it is not an ack.
      expectCounters(provider, {
        published: 1,
        confirmed: 1,
        acked: 0,
        retried: 0,
        deadLettered: 1,
        redelivered: 0,
        superseded: 0,
        lost: 0,
      });
    },
  });
}

/**
 * Checks the provider's durability counters of a fault-free test on a fresh provider, where every
 * figure is known exactly.
 */
export function expectCounters(provider: QueueProtocol, want: Partial<DurabilityCounters>): void {
  const counters = provider.counters();
  for (const [key, value] of Object.entries(want)) {
    expect(
      counters[key as keyof DurabilityCounters],
      `counters().${key} (all: ${JSON.stringify(counters)})`,
    ).toBe(value);
  }
}

/** Checks one dead letter's identity, content and bookkeeping. */
export function expectDeadLetter(
  letter: DeadLetter | undefined,
  want: { id: string; body: unknown; reason: string; attempts: number; lastError?: string },
): void {
  expect(letter, "a dead letter").toBeDefined();
  expect(letter!.message.id).toBe(want.id);
  expect(letter!.message.body).toEqual(want.body);
  expect(letter!.reason).toBe(want.reason);
  expect(letter!.attempts).toBe(want.attempts);
  expect(Number.isNaN(Date.parse(letter!.deadLetteredAt)), "deadLetteredAt is ISO-8601").toBe(false);
  if (want.lastError !== undefined) expect(letter!.lastError ?? "").toContain(want.lastError);
  expect(letter!.message.headers[Headers.deliveryAttempt] ?? String(want.attempts)).toBe(
    String(want.attempts),
  );
}

/** Waits for the queue to be empty with `n` dead letters, as stats report them. */
export async function expectDlqDepth(
  h: TestHarness,
  provider: QueueProtocol,
  queue: string,
  n: number,
): Promise<void> {
  await h.statsUntil(
    provider,
    { destination: queue },
    (s) => s.dlqDepth === n && s.depth === 0,
    `dlq depth ${n}`,
  );
}
