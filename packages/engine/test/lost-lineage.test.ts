import type { LineageProtocol, LineageRow, LineageUpdate } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LINEAGE_RECONCILED } from "../src/lineage/lineage-reconciler.js";
import { type Harness, openHarness } from "./harness.js";

/**
 * The real PGlite lineage store, except that it drops the next `plan.lose` closing updates of
 * message rows (`completed` with a finish time): as if the writer had given up on them after its
 * retries (counted lost).
 */
function losingCloses(plan: { lose: number; lost: string[] }) {
  return (inner: LineageProtocol): LineageProtocol => {
    const messageRows = new Set<string>();
    const remember = (row: LineageRow) => {
      if (row.kind === "message") messageRows.add(row.id);
    };
    return new Proxy(inner, {
      get(target, key) {
        if (key === "record")
          return (row: LineageRow) => {
            remember(row);
            target.record(row);
          };
        if (key === "registerPending")
          return (rows: readonly LineageRow[]) => {
            for (const row of rows) remember(row);
            return target.registerPending(rows);
          };
        if (key === "update") {
          return (id: string, update: LineageUpdate) => {
            const closing = update.status === "completed" && update.finishedAt !== undefined;
            if (plan.lose > 0 && closing && messageRows.has(id)) {
              plan.lose--;
              plan.lost.push(id);
              return;
            }
            target.update(id, update);
          };
        }
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
  };
}

const PIPELINE = `
name: lost-close
init: { route: split, message: { items: [1, 2, 3] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in }
    adapters: [{ type: sink }]
`;

describe("a lost lineage write that would close a row", () => {
  const plan = { lose: 0, lost: [] as string[] };
  let h: Harness;
  beforeAll(async () => {
    h = await openHarness({ wrapLineage: losingCloses(plan), reconcileAfterMs: 300 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("is reconciled after a bounded idle time, so the execution still completes", async () => {
    plan.lose = 1;
    const { id, status } = await h.run(PIPELINE);
    expect(status).toBe("completed");
    expect(plan.lost).toHaveLength(1);
    const rows = await h.rows(id);
    expect(rows.filter((r) => ["pending", "initiated", "processing"].includes(r.status))).toEqual([]);
    // The ledger knew how the message settled: the row is closed as completed, not failed.
    const reconciled = rows.find((r) => r.id === plan.lost[0]);
    expect(reconciled?.status).toBe("completed");
    expect(rows.some((r) => r.error?.class === LINEAGE_RECONCILED)).toBe(false);
  });
});

describe("a lost close of a message this process no longer remembers", () => {
  const plan = { lose: 0, lost: [] as string[] };
  let h: Harness;
  beforeAll(async () => {
    // The ledger remembers one settled id: the first sink message is forgotten by the time it counts.
    h = await openHarness({ wrapLineage: losingCloses(plan), reconcileAfterMs: 300, settledMemory: 1 });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("is failed with LineageReconciled once nothing holds it, and the execution completes", async () => {
    plan.lose = 1;
    const { id, status } = await h.run(PIPELINE);
    expect(status).toBe("completed");
    const reconciled = (await h.rows(id)).find((r) => r.id === plan.lost[0]);
    expect(reconciled).toMatchObject({ status: "failed" });
    expect(reconciled?.error?.class).toBe(LINEAGE_RECONCILED);
  });
});
