import { Headers, type RetryPolicy, retryDelayMs } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { expectCounters, expectDeadLetter, expectDlqDepth } from "./settlement.js";

/** The retry policy the retry tests use, shaped by the timing options and the broker's delay granularity. */
export function testRetryPolicy(env: SuiteEnv, granularityMs: number): RetryPolicy {
  const t = env.options.timing;
  return {
    maxAttempts: t.retryMaxAttempts,
    initialDelayMs: Math.max(t.retryInitialDelayMs, granularityMs * 2),
    multiplier: t.retryMultiplier,
    maxDelayMs: 60_000,
  };
}

export function registerRetry(env: SuiteEnv): void {
  const t = env.options.timing;
  // Generous: every delay at its upper bound, plus the deadline for the dead letter to show.
  let budget = 0;
  for (let a = 2; a <= t.retryMaxAttempts; a++) {
    budget += retryDelayMs({ ...testRetryPolicy(env, 0), initialDelayMs: t.retryInitialDelayMs }, a);
  }
  defineTest(env, "retry", {
    title:
      "FAILED is retried with the attempt header incremented and growing delays, then dead-lettered as exhausted",
    timeoutMs: 60_000 + budget * t.retryUpperFactor * 4,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("retry");
      const policy = testRetryPolicy(env, h.caps.delayGranularityMs);
      const recorder = collectDeliveries(() => ({
        status: "FAILED",
        reason: "conformance: transient failure",
      }));
      await h.subscribe(provider, queue, recorder.handler, { subscription: "flaky", retry: policy });
      const body = { job: "retry-me" };
      const { id } = await provider.publish(queue, { body });
      let total = 0;
      for (let a = 2; a <= policy.maxAttempts; a++) total += retryDelayMs(policy, a);
      const deadline =
        h.timing.deliveryTimeoutMs +
        total * h.timing.retryUpperFactor +
        h.expectations.retryDelaySlackMs * policy.maxAttempts;
      const [letter] = await h.deadLettersUntil(provider, { destination: queue }, 1, deadline);
      await h.quiet(policy.initialDelayMs);

      const seen = recorder.deliveries;
      expect(seen.map((d) => d.id)).toEqual(Array(policy.maxAttempts).fill(id));
      expect(
        seen.map((d) => d.attempt),
        "attempt numbers",
      ).toEqual(seen.map((_, i) => i + 1));
      expect(
        seen.map((d) => d.headers[Headers.deliveryAttempt]),
        "x-delivery-attempt",
      ).toEqual(seen.map((_, i) => String(i + 1)));
      for (const d of seen) expect(d.body).toEqual(body);

      const gaps: string[] = [];
      for (let i = 1; i < seen.length; i++) {
        const measured = seen[i]!.receivedAt - seen[i - 1]!.receivedAt;
        const expected =
          h.caps.retryDelay === "exponential" ? retryDelayMs(policy, i + 1) : policy.initialDelayMs;
        const low = expected * h.timing.retryLowerFactor;
        gaps.push(`${Math.round(measured)} ms (expected ${expected}, at least ${Math.round(low)})`);
        // Only the lower bound is asserted: a retry must wait for its backoff. How much later it comes
        // is printed, not asserted (speed goals live in bench/, as ratios).
        expect(measured, `gap before attempt ${i + 1}: ${gaps.at(-1)}`).toBeGreaterThanOrEqual(low);
      }
      h.note(`retry gaps (${h.caps.retryDelay}): ${gaps.join(", ")}`);
      expectDeadLetter(letter, {
        id,
        body,
        reason: "exhausted",
        attempts: policy.maxAttempts,
        lastError: "conformance: transient failure",
      });
      await expectDlqDepth(h, provider, queue, 1);
      // Retry and dead-letter copies count only as retried/deadLettered, never as published or acked.
      expectCounters(provider, {
        published: 1,
        confirmed: 1,
        acked: 0,
        retried: policy.maxAttempts - 1,
        deadLettered: 1,
        redelivered: 0,
        superseded: 0,
        lost: 0,
      });
    },
  });

  defineTest(env, "retry", {
    title: "a message that fails once and then succeeds is acknowledged, not dead-lettered",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("retry-once");
      const policy = testRetryPolicy(env, h.caps.delayGranularityMs);
      const recorder = collectDeliveries((_d, _s, previous) => (previous === 0 ? "FAILED" : "ACKNOWLEDGED"));
      await h.subscribe(provider, queue, recorder.handler, { subscription: "recovering", retry: policy });
      const { id } = await provider.publish(queue, { body: { once: true } });
      await recorder.waitForIds([id], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs + policy.initialDelayMs * h.timing.retryUpperFactor,
      });
      await h.quiet(policy.initialDelayMs);
      expect(recorder.deliveries.map((d) => d.attempt)).toEqual([1, 2]);
      await expectDlqDepth(h, provider, queue, 0);
      expectCounters(provider, {
        published: 1,
        confirmed: 1,
        acked: 1,
        retried: 1,
        deadLettered: 0,
        redelivered: 0,
        superseded: 0,
        lost: 0,
      });
    },
  });
}
