import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openHarness } from "./harness.js";
import { memoryLineage } from "./memory-lineage.js";
import { reachable, required, TARGETS } from "./provider-targets.js";

const ITEMS = 50;
const relay = `
name: relay
init: { route: split, message: { items: [${Array.from({ length: ITEMS }, (_, i) => i).join(", ")}] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [hop.in]
  hop:
    inbound: { queue: hop.in, concurrency: 8, prefetch: 16 }
    adapters: [{ type: passthrough }]
    outbound: [last.in]
  last:
    inbound: { queue: last.in, concurrency: 8, prefetch: 16 }
    adapters: [{ type: passthrough }]
`;

for (const target of TARGETS) {
  const unreachable = reachable.get(target.name);
  describe.skipIf(unreachable !== undefined && !required)(
    `completion waits for ${target.name} to settle the last delivery`,
    () => {
      let h: Harness;
      beforeAll(async () => {
        if (unreachable !== undefined)
          throw new Error(`FACTFLOW_REQUIRE_SERVICES=1 but ${target.name} is unreachable: ${unreachable}`);
        // An instant lineage store: completion is decided as early as it can be.
        h = await openHarness({ queue: target.create(), wrapLineage: () => memoryLineage() });
      });
      afterAll(async () => {
        await h?.close();
      });

      it("leaves no message behind in any queue after completed (20 runs)", async () => {
        for (let run = 0; run < 20; run++) {
          const { id, status } = await h.run(relay);
          expect(status, `run ${run}`).toBe("completed");
          for (const queue of ["split.in", "hop.in", "last.in"]) {
            const stats = await h.queue.admin.stats({ destination: `/queue/${id}/${queue}` });
            expect([queue, stats.depth, stats.inFlight, stats.dlqDepth], `run ${run}`).toEqual([
              queue,
              0,
              0,
              0,
            ]);
          }
        }
      });
    },
  );
}
