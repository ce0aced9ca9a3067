import { MessageStatus, type SettledDelivery } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { emptyDurabilityCounters } from "../src/counters.js";
import { decideSettlement } from "../src/settlement.js";
import { SettlementReport, undecodableVerdict } from "../src/settlement-report.js";
import { resolveSubscribeOptions } from "../src/subscribe-options.js";

const policy = { maxAttempts: 2, initialDelayMs: 100, multiplier: 2, maxDelayMs: 1_000 };
const caps = { fifo: true, messageGroups: true, priorities: true };

function reportWith(events: SettledDelivery[]) {
  const counters = emptyDurabilityCounters();
  const report = new SettlementReport(counters, { destination: "/queue/q", name: "s" }, (settled) =>
    events.push(settled),
  );
  return { counters, report };
}

describe("SettlementReport", () => {
  it("counts each verdict once and reports it with the delivery's identity", () => {
    const events: SettledDelivery[] = [];
    const { counters, report } = reportWith(events);
    const first = { attempt: 1, policy, isTopic: false };
    const last = { attempt: 2, policy, isTopic: false };
    const returned = (status: MessageStatus) => ({ kind: "returned", result: status }) as const;
    report.settled(decideSettlement(returned(MessageStatus.ACKNOWLEDGED), first), {
      messageId: "a",
      attempt: 1,
    });
    report.settled(decideSettlement(returned(MessageStatus.FAILED), first), { messageId: "b", attempt: 1 });
    report.settled(decideSettlement({ kind: "threw", error: new Error("x") }, first), {
      messageId: "c",
      attempt: 1,
    });
    report.settled(decideSettlement({ kind: "timed-out", timeoutMs: 5 }, last), {
      messageId: "d",
      attempt: 2,
    });
    report.settled(decideSettlement({ kind: "stopped" }, first), { messageId: "e", attempt: 1 });
    report.settled(undecodableVerdict("no JSON body"), { messageId: undefined, attempt: 1 }, true);

    expect(counters).toMatchObject({ acked: 1, retried: 1, redelivered: 1, deadLettered: 2 });
    expect(events.map((e) => [e.messageId, e.kind, e.attempt])).toEqual([
      ["a", "acked", 1],
      ["b", "retried", 1],
      ["c", "retried", 1],
      ["d", "dead-lettered", 2],
      ["e", "handed-back", 1],
      [undefined, "dead-lettered", 1],
    ]);
    expect(events[1]).toMatchObject({ nextAttempt: 2, delayMs: 100, incomplete: false });
    expect(events[2]).toMatchObject({ incomplete: true, lastError: "handler threw Error: x" });
    expect(events[3]).toMatchObject({ reason: "incomplete", undecodable: false, destination: "/queue/q" });
    expect(events[5]).toMatchObject({ reason: "rejected", undecodable: true, subscription: "s" });
    expect(events[5]?.kind === "dead-lettered" && events[5].lastError).toBe(
      "not a Factflow message: no JSON body",
    );
  });

  it("keeps counting when the listener throws", () => {
    const counters = emptyDurabilityCounters();
    const report = new SettlementReport(counters, { destination: "/queue/q", name: "s" }, () => {
      throw new Error("listener bug");
    });
    report.settled({ kind: "ack" }, { messageId: "a", attempt: 1 });
    expect(counters.acked).toBe(1);
  });

  it("subscribe options carry onSettled through validation and refuse a non-function", () => {
    const onSettled = () => {};
    expect(resolveSubscribeOptions({ subscription: "s", onSettled }, caps).onSettled).toBe(onSettled);
    expect(() =>
      resolveSubscribeOptions({ subscription: "s", onSettled: "nope" as unknown as () => void }, caps),
    ).toThrow(/onSettled must be a function/);
  });
});
