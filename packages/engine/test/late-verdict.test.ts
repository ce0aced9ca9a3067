import { createEmbeddedProvider } from "@factflow/infra-embedded";
import type { SettledDelivery, SettlementListener } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forwarding, type Harness, openHarness } from "./harness.js";

/**
 * A provider reports a retry only once its copy is confirmed, and a broker may deliver the copy
 * before it confirms it (RabbitMQ does): the next attempt can run and fail before the report of the
 * attempt before it arrives. This tap on the real embedded provider holds every `retried` report back
 * until the next delivery of the same message has returned, which makes that order certain.
 */
function lateRetryReports(inner: ReturnType<typeof createEmbeddedProvider>) {
  return forwarding(inner, {
    subscribe: (destination, handler, options) => {
      const listener: SettlementListener | undefined = options?.onSettled;
      const held = new Map<string, SettledDelivery[]>();
      const tapped: SettlementListener = (settled) => {
        if (settled.kind === "retried" && settled.messageId !== undefined) {
          const list = held.get(settled.messageId) ?? [];
          list.push(settled);
          held.set(settled.messageId, list);
          return;
        }
        listener?.(settled);
      };
      return inner.subscribe(
        destination,
        async (delivery, signal) => {
          const result = await handler(delivery, signal);
          const late = held.get(delivery.message.id);
          held.delete(delivery.message.id);
          for (const settled of late ?? []) listener?.(settled);
          return result;
        },
        { ...options, onSettled: tapped },
      );
    },
  });
}

let h: Harness;
beforeAll(async () => {
  h = await openHarness({ queue: lateRetryReports(createEmbeddedProvider({ mode: "memory" })) });
});
afterAll(async () => {
  await h?.close();
});

describe("a retry reported after the next attempt ran", () => {
  it("closes the row when the last attempt is dead-lettered", async () => {
    const { id, status } = await h.run(`
name: late-verdict
settings:
  retry: { max_attempts: 2, initial_delay_ms: 1, multiplier: 1 }
init: { route: work, message: { n: 1 } }
routes:
  work:
    inbound: { queue: work.in }
    adapters:
      - type: fail
        config: { mode: transient }
`);
    expect(status).toBe("completed");
    const [message] = await h.rows(id, "message");
    expect(message?.status).toBe("failed");
    expect(message?.attempt).toBe(2);
    expect(message?.error?.class).not.toBe("LineageReconciled");
    const stats = await h.queue.admin.stats({ destination: `/queue/${id}/work.in` });
    expect(stats.dlqDepth).toBe(1);
  });
});
