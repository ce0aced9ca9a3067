import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DELIVERY_ABANDONED, loadPipelineConfig } from "../src/index.js";
import { blocks, type Harness, openHarness, seen, waitFor } from "./harness.js";

const pipeline = (failConfig: string, settings = "") => `
name: failing
settings:
  retry: { max_attempts: 3, initial_delay_ms: 10, multiplier: 1 }
${settings}
init:
  route: work
  message: { n: 1 }
routes:
  work:
    inbound: { queue: work.in }
    adapters:
      - type: sink
      - type: fail
        config: ${failConfig}
`;

let h: Harness;
beforeAll(async () => {
  h = await openHarness();
});
afterAll(async () => {
  blocks.released = true;
  await h?.close();
});

describe("failure paths", () => {
  it("retries a transient failure (FAILED) with the next attempt and then completes", async () => {
    const { id, status } = await h.run(pipeline("{ mode: transient, until_attempt: 2 }"));
    expect(status).toBe("completed");
    expect(seen.get(id)?.map((s) => s.attempt)).toEqual([1, 2, 3]);
    const [message] = await h.rows(id, "message");
    expect(message?.status).toBe("completed");
    expect(message?.attempt).toBe(3);
    const failRows = (await h.rows(id, "adapter")).filter((r) => r.adapter === "fail");
    expect(failRows.map((r) => `${r.attempt}:${r.status}`).sort()).toEqual([
      "1:failed",
      "2:failed",
      "3:completed",
    ]);
    expect(failRows.find((r) => r.status === "failed")?.error?.retryable).toBe(true);
  });

  it("dead-letters a transient failure once the budget is spent, and the row ends failed", async () => {
    const { id, status } = await h.run(pipeline("{ mode: transient }"));
    expect(status).toBe("completed");
    expect(seen.get(id)).toHaveLength(3);
    const [message] = await h.rows(id, "message");
    expect(message?.status).toBe("failed");
    const stats = await h.queue.admin.stats({ destination: `/queue/${id}/work.in` });
    expect(stats.dlqDepth).toBe(1);
  });

  it("rejects a permanent failure at once (REJECTED → dead letter) and marks the row failed", async () => {
    const { id, status } = await h.run(pipeline("{ mode: permanent, message: broken input }"));
    expect(status).toBe("completed");
    expect(seen.get(id)).toHaveLength(1);
    const [message] = await h.rows(id, "message");
    expect(message?.status).toBe("failed");
    expect(message?.error?.message).toMatch(/broken input/);
    expect(message?.error?.retryable).toBe(false);
    const page = await h.queue.admin.browseDeadLetters(
      { destination: `/queue/${id}/work.in` },
      { offset: 0, limit: 10 },
    );
    expect(page.total).toBe(1);
  });

  it("aborts the execution on metadata.fatal: execution failed, row failed with the error", async () => {
    const { id, status, events } = await h.run(pipeline("{ mode: fatal, message: bad credential }"));
    expect(status).toBe("failed");
    const record = await h.engine.service.get(id);
    expect(record.error).toMatch(/adapter "fail" on route "work" reported a fatal error: bad credential/);
    expect(events.at(-1)?.type).toBe("failed");
    const fatalRow = (await h.rows(id, "adapter")).find((r) => r.adapter === "fail");
    expect(fatalRow?.status).toBe("failed");
    expect(fatalRow?.error?.fatal).toBe(true);
    expect(seen.get(id)).toHaveLength(1);
  });

  it("cancellation mid-handler writes a terminal DeliveryAbandoned row and leaves the message for redelivery", async () => {
    blocks.released = false;
    const yaml = `
name: cancel-me
init: { route: slow }
routes:
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: block }]
`;
    const config = await loadPipelineConfig(yaml, { registry: h.engine.registry });
    const entered = blocks.entered;
    const record = await h.engine.service.create({ config });
    await waitFor(() => blocks.entered > entered, "the handler to start");
    await h.engine.service.cancel(record.id);
    expect((await h.engine.service.get(record.id)).status).toBe("cancelled");
    const adapterRow = (await h.rows(record.id, "adapter"))[0];
    expect(adapterRow?.status).toBe("abandoned");
    expect(adapterRow?.error?.class).toBe(DELIVERY_ABANDONED);
    const [message] = await h.rows(record.id, "message");
    expect(message?.status).toBe("pending");
    // The message is still on the broker, not acked and not dead-lettered.
    const stats = await h.queue.admin.stats({ destination: `/queue/${record.id}/slow.in` });
    expect(stats.depth + stats.inFlight).toBe(1);
    expect(stats.dlqDepth).toBe(0);
  });

  it("a handler timeout abandons the delivery, the broker redelivers it, and the execution completes", async () => {
    blocks.released = false;
    const yaml = `
name: timeout
settings: { handler_timeout_ms: 150 }
init: { route: slow }
routes:
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: sink }, { type: block }]
`;
    const config = await loadPipelineConfig(yaml, { registry: h.engine.registry });
    const record = await h.engine.service.create({ config });
    await waitFor(
      async () => (await h.rows(record.id, "adapter")).some((r) => r.status === "abandoned"),
      "an abandoned row",
    );
    blocks.released = true;
    expect(await h.engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    const blockRows = (await h.rows(record.id, "adapter")).filter((r) => r.adapter === "block");
    expect(blockRows.some((r) => r.status === "abandoned" && r.error?.class === DELIVERY_ABANDONED)).toBe(
      true,
    );
    expect(blockRows.some((r) => r.status === "completed")).toBe(true);
    expect((seen.get(record.id) ?? []).length).toBeGreaterThanOrEqual(2);
  });

  it("a handler timeout on the last attempt closes the row failed from the provider's dead-letter verdict", async () => {
    blocks.released = false;
    const yaml = `
name: timeout-last
settings: { handler_timeout_ms: 150, retry: { max_attempts: 1 } }
init: { route: slow }
routes:
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: sink }, { type: block }]
`;
    const config = await loadPipelineConfig(yaml, { registry: h.engine.registry });
    const record = await h.engine.service.create({ config });
    // The provider dead-letters the timed-out last attempt (incomplete); its verdict closes the row,
    // so the execution completes without the blocked handler ever returning.
    expect(await h.engine.service.waitForEnd(record.id, 60_000)).toBe("completed");
    blocks.released = true;
    const [message] = await h.rows(record.id, "message");
    expect(message?.status).toBe("failed");
    expect(message?.attempt).toBe(1);
    const stats = await h.queue.admin.stats({ destination: `/queue/${record.id}/slow.in` });
    expect(stats.dlqDepth).toBe(1);
  });
});
