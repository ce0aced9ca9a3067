import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openHarness, seen } from "./harness.js";
import { reachable, required, TARGETS } from "./provider-targets.js";

const ITEMS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i) => `{ i: ${i}, g: ${i < 7 ? "c" : "b"} }`);

/**
 * Seven messages wait unsettled in a partial batch (more than half of the default prefetch of 10)
 * while the four others are dropped: the route drains only if the provider goes on delivering after
 * the dropped ones settle, and only then does the end-of-run flush emit the batch.
 */
function heldBatch(drop: "condition" | "filter"): string {
  const keep = "{ field: g, equals: c }";
  return `
name: held-batch-${drop}
init: { route: a, message: { items: [${ITEMS.join(", ")}] } }
routes:
  a:
    inbound: { queue: q.a }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [q.b]
  b:
    inbound: { queue: q.b }
    ${drop === "condition" ? `condition: ${keep}` : ""}
    adapters:
      ${drop === "filter" ? `- { type: filter, config: ${keep} }` : ""}
      - { type: batch, config: { size: 8, timeout_ms: 600000 } }
      - { type: sink }
`;
}

for (const target of TARGETS) {
  const unreachable = reachable.get(target.name);
  describe.skipIf(unreachable !== undefined && !required)(
    `a partial batch held while others are dropped, on ${target.name}`,
    () => {
      let h: Harness;
      beforeAll(async () => {
        if (unreachable !== undefined)
          throw new Error(`FACTFLOW_REQUIRE_SERVICES=1 but ${target.name} is unreachable: ${unreachable}`);
        h = await openHarness({ queue: target.create() });
      });
      afterAll(async () => {
        await h?.close();
      });

      for (const drop of ["condition", "filter"] as const) {
        it(`completes with one end-of-run batch of the seven kept messages (dropped by a ${drop})`, async () => {
          const { id, status } = await h.run(heldBatch(drop));
          expect(status).toBe("completed");
          const batches = (seen.get(id) ?? []).filter((s) => s.route === "b");
          expect(batches.map((s) => (s.body as { count: number }).count)).toEqual([7]);
          for (const queue of ["q.a", "q.b"]) {
            const stats = await h.queue.admin.stats({ destination: `/queue/${id}/${queue}` });
            expect([queue, stats.depth, stats.inFlight, stats.dlqDepth]).toEqual([queue, 0, 0, 0]);
          }
        });
      }
    },
  );
}
