import { type HandlerResult, MessageStatus, type SettledDelivery } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { waitFor } from "../wait-for.js";
import { testRetryPolicy } from "./retry.js";
import { expectCounters } from "./settlement.js";
import { aborted, field, gate } from "./util.js";

/** What the handler does with each message of the verdict test, by its body's `then`. */
const RESPONSES: Record<string, (previous: number) => HandlerResult> = {
  ack: () => MessageStatus.ACKNOWLEDGED,
  "fail-once": (previous) => (previous === 0 ? MessageStatus.FAILED : MessageStatus.ACKNOWLEDGED),
  reject: () => MessageStatus.REJECTED,
  "always-fail": () => MessageStatus.FAILED,
  "always-throw": () => {
    throw new Error("conformance: handler crashed");
  },
};

/** Collects the verdicts `onSettled` reports; waits for a number of them. */
function verdictLog() {
  const events: SettledDelivery[] = [];
  return {
    events,
    onSettled: (settled: SettledDelivery) => {
      events.push(settled);
    },
    /** The reported verdicts of one message, in order: `kind` (`reason` for a dead letter) @ attempt. */
    of(id: string): string[] {
      return events
        .filter((e) => e.messageId === id)
        .map((e) => `${e.kind === "dead-lettered" ? `dead-lettered:${e.reason}` : e.kind}@${e.attempt}`);
    },
    until(n: number, timeoutMs: number): Promise<void> {
      return waitFor(() => events.length >= n, {
        timeoutMs,
        description: () => `${n} reported verdicts, have ${JSON.stringify(events)}`,
      }).then(() => undefined);
    },
  };
}

export function registerVerdicts(env: SuiteEnv): void {
  defineTest(env, "verdicts", {
    title: "onSettled reports each settled delivery once: acked, retried, dead-lettered with its reason",
    timeoutMs: 120_000,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("verdicts");
      const log = verdictLog();
      const policy = { ...testRetryPolicy(env, h.caps.delayGranularityMs), maxAttempts: 2 };
      const recorder = collectDeliveries((delivery, _signal, previous) => {
        const then = String(field(delivery.message.body, "then"));
        return (RESPONSES[then] as (previous: number) => HandlerResult)(previous);
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "judged",
        retry: policy,
        onSettled: log.onSettled,
      });
      const ids: Record<string, string> = {};
      for (const then of Object.keys(RESPONSES))
        ids[then] = (await provider.publish(queue, { body: { then } })).id;
      // ack 1 + fail-once 2 + reject 1 + always-fail 2 + always-throw 2
      const timeoutMs =
        h.timing.deliveryTimeoutMs * 2 + policy.initialDelayMs * 4 + h.expectations.redeliveryWithinMs;
      await log.until(8, timeoutMs);
      await h.quiet();
      expect(log.events, "no verdict reported twice").toHaveLength(8);
      expect(log.of(ids.ack!)).toEqual(["acked@1"]);
      expect(log.of(ids["fail-once"]!)).toEqual(["retried@1", "acked@2"]);
      expect(log.of(ids.reject!)).toEqual(["dead-lettered:rejected@1"]);
      expect(log.of(ids["always-fail"]!)).toEqual(["retried@1", "dead-lettered:exhausted@2"]);
      expect(log.of(ids["always-throw"]!)).toEqual(["retried@1", "dead-lettered:incomplete@2"]);
      for (const event of log.events) {
        expect(event.destination).toBe(queue);
        expect(event.subscription).toBe("judged");
        if (event.kind === "retried") {
          expect(event.nextAttempt).toBe(2);
          expect(event.delayMs).toBe(policy.initialDelayMs);
          expect(event.incomplete, "a throw is an incomplete attempt").toBe(
            event.messageId === ids["always-throw"],
          );
        }
        if (event.kind === "dead-lettered") expect(event.undecodable).toBe(false);
      }
      const thrown = log.events.find(
        (e) => e.messageId === ids["always-throw"] && e.kind === "dead-lettered",
      );
      expect(thrown?.kind === "dead-lettered" ? thrown.lastError : "").toContain("handler crashed");
      // The counters count the same settlements the events report.
      expectCounters(provider, { acked: 2, retried: 2, deadLettered: 3, lost: 0 });
    },
  });

  defineTest(env, "verdicts", {
    title: "a last attempt past handlerTimeoutMs is reported dead-lettered, reason incomplete",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("verdict-timeout");
      const log = verdictLog();
      const recorder = collectDeliveries(async (_d, signal) => {
        await aborted(signal);
        throw new Error("conformance: timed out");
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "slow",
        retry: { maxAttempts: 1 },
        handlerTimeoutMs: 200,
        onSettled: log.onSettled,
      });
      const { id } = await provider.publish(queue, { body: { slow: true } });
      await log.until(1, h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs);
      expect(log.of(id)).toEqual(["dead-lettered:incomplete@1"]);
      const event = log.events[0];
      expect(event?.kind === "dead-lettered" ? event.lastError : "").toContain("timed out after 200 ms");
      expectCounters(provider, { acked: 0, retried: 0, deadLettered: 1, lost: 0 });
    },
  });

  defineTest(env, "verdicts", {
    title: "a delivery held when its subscription stops is reported handed-back",
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("verdict-stop");
      const log = verdictLog();
      const held = gate();
      const recorder = collectDeliveries(async (_d, signal) => {
        await held.wait(signal);
        return MessageStatus.ACKNOWLEDGED;
      });
      const subscription = await h.subscribe(provider, queue, recorder.handler, {
        subscription: "leaving",
        onSettled: log.onSettled,
      });
      const { id } = await provider.publish(queue, { body: { held: true } });
      await recorder.waitForCount(1, { timeoutMs: h.timing.deliveryTimeoutMs });
      await subscription.unsubscribe();
      await log.until(1, h.timing.deliveryTimeoutMs);
      expect(log.of(id)).toEqual(["handed-back@1"]);
      // The message is still there for the next consumer. A hand-back is counted `redelivered` at most
      // once (where the broker flags the next delivery; Artemis and Pulsar do not flag it).
      const next = collectDeliveries();
      await h.subscribe(provider, queue, next.handler, { subscription: "arriving" });
      await next.waitForIds([id], {
        status: "ACKNOWLEDGED",
        timeoutMs: h.timing.deliveryTimeoutMs + h.expectations.redeliveryWithinMs,
      });
      expectCounters(provider, { acked: 1, retried: 0, deadLettered: 0 });
      const { redelivered } = provider.counters();
      expect(redelivered, "a hand-back counted as one redelivery at most").toBeLessThanOrEqual(1);
      if (next.deliveries[0]?.redelivered === true)
        expect(redelivered, "a flagged redelivery is counted").toBe(1);
    },
  });
}
