import type { createArtemisProvider } from "@factflow/infra-artemis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, openHarness, seen } from "./harness.js";
import { reachable, required, TARGETS } from "./provider-targets.js";

/** An adapter that never finishes, on a route with a short handler timeout and two attempts. */
const hanging = `
name: never-settles
settings:
  handler_timeout_ms: 300
  retry: { max_attempts: 2, initial_delay_ms: 100, multiplier: 1 }
init: { route: slow, message: { n: 1 } }
routes:
  slow:
    inbound: { queue: slow.in }
    adapters: [{ type: sink }, { type: hang }]
`;

/** A message retried then dead-lettered, next to one that goes through: the end of an execution with failures. */
const retryThenDead = `
name: retry-dead
settings:
  retry: { max_attempts: 3, initial_delay_ms: 50, multiplier: 1 }
init: { route: split, message: { items: [1, 2, 3, 4] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [work.in]
  work:
    inbound: { queue: work.in, concurrency: 4, prefetch: 4 }
    adapters: [{ type: sink }, { type: fail, config: { mode: transient, until_attempt: 2 } }]
    outbound: [last.in]
  last:
    inbound: { queue: last.in, concurrency: 2 }
    adapters: [{ type: fail, config: { mode: transient } }]
`;

for (const target of TARGETS) {
  const unreachable = reachable.get(target.name);
  describe.skipIf(unreachable !== undefined && !required)(
    `work that never settles, on ${target.name}`,
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

      it("an adapter that always times out is dead-lettered after its attempts and the execution completes", async () => {
        const { id, status } = await h.run(hanging);
        expect(status).toBe("completed");
        expect(seen.get(id)?.map((s) => s.attempt)).toEqual([1, 2]);
        const [message] = await h.rows(id, "message");
        expect(message).toMatchObject({ status: "failed", attempt: 2 });
        expect(message?.error?.class).toBe("HandlerTimeout");
        const stats = await h.queue.admin.stats({ destination: `/queue/${id}/slow.in` });
        expect(stats).toMatchObject({ depth: 0, dlqDepth: 1 });
        const [letter] = (
          await h.queue.admin.browseDeadLetters(
            { destination: `/queue/${id}/slow.in` },
            { offset: 0, limit: 1 },
          )
        ).items;
        expect(letter?.reason).toBe("incomplete");
      });

      it("a retry/dead-letter pipeline leaves every execution queue empty, three runs in a row", async () => {
        for (let run = 0; run < 3; run++) {
          const { id, status } = await h.run(retryThenDead);
          expect(status, `run ${run}`).toBe("completed");
          for (const queue of ["split.in", "work.in", "last.in"]) {
            const stats = await h.queue.admin.stats({ destination: `/queue/${id}/${queue}` });
            expect([queue, stats.depth, stats.inFlight], `run ${run}`).toEqual([queue, 0, 0]);
          }
          const dead = await h.queue.admin.stats({ destination: `/queue/${id}/last.in` });
          expect(dead.dlqDepth, `run ${run}: every item dead-lettered once at the end`).toBe(4);
        }
        expect(h.queue.counters().lost).toBe(0);
        if (target.name === "artemis") {
          // The connection stayed open: no ACK for a consumer that was gone.
          expect((h.queue as ReturnType<typeof createArtemisProvider>).connectionCount()).toBe(1);
        }
      });
    },
  );
}
