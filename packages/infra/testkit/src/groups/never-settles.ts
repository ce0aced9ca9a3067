import { type HandlerResult, MessageStatus, retryDelayMs } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { testRetryPolicy } from "./retry.js";
import { expectDeadLetter, expectDlqDepth } from "./settlement.js";

const TIMEOUT_MS = 300;

/** Handlers that never settle a delivery, each in its own way. */
const NEVER: {
  label: string;
  timeoutMs?: number;
  respond: (signal: AbortSignal) => Promise<HandlerResult> | HandlerResult;
  lastError: string;
}[] = [
  {
    label: "always throws",
    respond: () => {
      throw new Error("conformance: always broken");
    },
    lastError: "conformance: always broken",
  },
  {
    label: "always returns PENDING",
    respond: () => MessageStatus.PENDING,
    lastError: "not a settling status",
  },
  {
    // Ignores its signal and never returns: only the provider's timeout can end it.
    label: "never finishes",
    timeoutMs: TIMEOUT_MS,
    respond: () => new Promise<never>(() => {}),
    lastError: `timed out after ${TIMEOUT_MS} ms`,
  },
];

/**
 * The one bounded policy for work that never settles: every such delivery counts as an attempt, with
 * the retry policy's backoff between attempts, and after `maxAttempts` it is dead-lettered as
 * `incomplete`. The handler runs exactly `maxAttempts` times: no provider may redeliver without
 * bound or without delay.
 */
export function registerNeverSettles(env: SuiteEnv): void {
  for (const { label, timeoutMs, respond, lastError } of NEVER) {
    defineTest(env, "never-settles", {
      title: `a handler that ${label} runs exactly maxAttempts times with backoff, then is dead-lettered as incomplete`,
      timeoutMs: 120_000,
      body: async (h) => {
        const provider = await h.provider();
        const queue = h.queue("never");
        const policy = { ...testRetryPolicy(env, h.caps.delayGranularityMs), maxAttempts: 3 };
        const recorder = collectDeliveries((_d, signal) => respond(signal));
        await h.subscribe(provider, queue, recorder.handler, {
          subscription: "never",
          retry: policy,
          ...(timeoutMs === undefined ? {} : { handlerTimeoutMs: timeoutMs }),
        });
        const body = { never: label };
        const { id } = await provider.publish(queue, { body });
        const [letter] = await h.deadLettersUntil(provider, { destination: queue }, 1, 60_000);
        // Long enough for a fourth attempt to show up if a provider sent one.
        await h.quiet(policy.initialDelayMs * 2 + (timeoutMs ?? 0));
        const seen = recorder.deliveries;
        expect(
          seen.map((d) => d.attempt),
          "one delivery per attempt, attempts counted",
        ).toEqual([1, 2, 3]);
        for (let i = 1; i < seen.length; i++) {
          const gap = seen[i]!.receivedAt - seen[i - 1]!.receivedAt;
          const least = (timeoutMs ?? 0) + retryDelayMs(policy, i + 1) * h.timing.retryLowerFactor;
          expect(gap, `attempt ${i + 1} waited for its backoff`).toBeGreaterThanOrEqual(least);
        }
        expectDeadLetter(letter, { id, body, reason: "incomplete", attempts: 3, lastError });
        await expectDlqDepth(h, provider, queue, 1);
      },
    });
  }
}
