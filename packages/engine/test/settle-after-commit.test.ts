import type { LineageProtocol } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadPipelineConfig } from "../src/index.js";
import { forwardingLineage, type Harness, openHarness, waitFor } from "./harness.js";

/** One quick route with a short handler timeout. */
const QUICK = `
name: quick
init:
  route: a
  message: { n: 1 }
routes:
  a:
    inbound: { queue: a.in, timeout_ms: 100 }
    adapters: [{ type: passthrough }]
`;

/** A route whose every attempt outlasts its timeout: dead-lettered after two timed-out attempts. */
const SLOW = `
name: slow
settings:
  retry: { max_attempts: 2, initial_delay_ms: 10, multiplier: 1, max_delay_ms: 10 }
init:
  route: b
  message: { n: 1 }
routes:
  b:
    inbound: { queue: b.in, timeout_ms: 100 }
    adapters: [{ type: delay, config: { ms: 5000 } }]
`;

/** The lineage store, with its first `flushSettled` held back until `gate.open()`. */
function gated(lineage: LineageProtocol) {
  const gate = { asked: 0, open: () => {} };
  const opened = new Promise<void>((resolve) => {
    gate.open = resolve;
  });
  const wrapper = forwardingLineage(lineage, {
    flushSettled: () => {
      gate.asked++;
      const commit = lineage.flushSettled?.() ?? Promise.resolve();
      return gate.asked === 1 ? opened.then(() => commit) : commit;
    },
  });
  return { wrapper, gate };
}

let h: Harness;
let gate: ReturnType<typeof gated>["gate"];
beforeAll(async () => {
  h = await openHarness({
    wrapLineage: (lineage) => {
      const made = gated(lineage);
      gate = made.gate;
      return made.wrapper;
    },
  });
});
afterAll(async () => {
  await h?.close();
});

describe("settling a delivery after its lineage commit", () => {
  it("acknowledges only once the commit is done, however long it takes past the handler's timeout, and the execution waits for it", async () => {
    const service = h.engine.service;
    const quick = await service.create({
      config: await loadPipelineConfig(QUICK, { registry: h.engine.registry }),
    });
    await waitFor(() => gate.asked >= 1, "the quick route's delivery to ask for its commit");
    const before = h.queue.counters();

    // A second execution whose deliveries time out twice: once it is dead-lettered, more than twice
    // the quick route's timeout has passed since its delivery started waiting for the commit.
    const slow = await service.create({
      config: await loadPipelineConfig(SLOW, { registry: h.engine.registry }),
    });
    expect(await service.waitForEnd(slow.id, 60_000)).toBe("completed");

    // Still waiting: neither acknowledged nor timed out, and the execution is not over.
    const during = h.queue.counters();
    expect(during.acked).toBe(before.acked);
    expect((await service.get(quick.id)).status).toBe("running");

    gate.open();
    expect(await service.waitForEnd(quick.id, 60_000)).toBe("completed");
    expect(h.queue.counters().acked).toBe(before.acked + 1);
    // Run once: a timeout would have run it again under a second adapter row.
    const [row] = await h.rows(quick.id, "message");
    expect(row).toMatchObject({ route: "a", status: "completed", attempt: 1 });
    expect(await h.rows(quick.id, "adapter")).toHaveLength(1);
  });
});
