import { createEmbeddedProvider } from "@factflow/infra-embedded";
import type { LineageRow, QueueProtocol } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { forwarding, type Harness, openHarness, seen } from "./harness.js";

const CHILDREN = 25;

/** `root` splits `children` items, each a message to `leaf` (a `sink`). */
function fanOutYaml(name: string, children: number, leafConcurrency: number): string {
  return `
name: ${name}
init: { route: root, message: { items: [${Array.from({ length: children }, (_, i) => i).join(", ")}] } }
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [leaf.in]
  leaf:
    inbound: { queue: leaf.in, concurrency: ${leafConcurrency} }
    adapters: [{ type: sink }]
`;
}

/** The real embedded provider, with publishes to `leaf.in` slowed down to widen the race window. */
function slowLeafPublishes(
  inner: QueueProtocol,
  onLeafPublish: (destination: string) => Promise<void>,
): QueueProtocol {
  return forwarding(inner, {
    async publish(destination, message) {
      if (destination.endsWith("/leaf.in")) {
        await onLeafPublish(destination);
        await new Promise((r) => setTimeout(r, 5));
      }
      return inner.publish(destination, message);
    },
  });
}

describe("fan-out and the completion gate", () => {
  let h: Harness;
  const openAtFirstPublish: number[] = [];
  beforeAll(async () => {
    let lineage: Harness["db"]["lineage"] | undefined;
    const queue = slowLeafPublishes(createEmbeddedProvider({ mode: "memory" }), async (destination) => {
      const executionId = destination.split("/")[2] as string;
      // `rows` reads what is committed, without flushing the writer: it sees only durable rows.
      if (openAtFirstPublish.length === 0 && lineage) {
        openAtFirstPublish.push(
          (await lineage.rows(executionId, { kind: "message", route: "leaf", limit: 1 })).total,
        );
      }
    });
    h = await openHarness({ queue });
    lineage = h.db.lineage;
  });
  afterAll(async () => {
    await h?.close();
  });

  it("registers every child before the first publish, and completes only after all of them ran", async () => {
    const { id, status, events } = await h.run(fanOutYaml("race", CHILDREN, 8));
    expect(status).toBe("completed");
    // Every child's row was durable before the first child was sent.
    expect(openAtFirstPublish[0]).toBe(CHILDREN);
    const leafCalls = seen.get(id) ?? [];
    expect(leafCalls).toHaveLength(CHILDREN);
    const completedAt = Date.parse(events.at(-1)?.at ?? "");
    expect(Math.max(...leafCalls.map((c) => c.at))).toBeLessThanOrEqual(completedAt);
    const messages = await h.rows(id, "message");
    expect(messages.filter((r) => r.route === "leaf" && r.status === "completed")).toHaveLength(CHILDREN);
  });
});

describe("fan-out without strict lineage", () => {
  let h: Harness;
  const registered: string[] = [];
  beforeAll(async () => {
    const queue = slowLeafPublishes(createEmbeddedProvider({ mode: "memory" }), async () => {});
    h = await openHarness({
      queue,
      strictLineage: false,
      wrapLineage: (lineage) =>
        new Proxy(lineage, {
          get(target, key) {
            const value = Reflect.get(target, key, target);
            if (key !== "registerPending") return typeof value === "function" ? value.bind(target) : value;
            return (rows: readonly LineageRow[]) => {
              for (const r of rows) registered.push(r.route);
              return target.registerPending(rows);
            };
          },
        }),
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("queues the children instead of registering them, and still completes only after all of them ran", async () => {
    const { id, status, events } = await h.run(fanOutYaml("queued-children", CHILDREN, 8));
    expect(status).toBe("completed");
    // Only the init message went through registerPending; the children were recorded.
    expect(registered).toEqual(["root"]);
    const leafCalls = seen.get(id) ?? [];
    expect(leafCalls).toHaveLength(CHILDREN);
    const completedAt = Date.parse(events.at(-1)?.at ?? "");
    expect(Math.max(...leafCalls.map((c) => c.at))).toBeLessThanOrEqual(completedAt);
    const messages = await h.rows(id, "message");
    expect(messages.filter((r) => r.route === "leaf" && r.status === "completed")).toHaveLength(CHILDREN);
  });
});

describe("a large fan-out", () => {
  const LARGE = 5000;
  let h: Harness;
  const probe = { leafPublishes: 0, openAtFirstPublish: -1, turns: 0, turnsDuringPublishes: -1 };
  beforeAll(async () => {
    let lineage: Harness["db"]["lineage"] | undefined;
    let ticking = false;
    const tick = () => {
      probe.turns++;
      if (ticking) setImmediate(tick);
    };
    // The first publish to `leaf.in` reads how many child rows are registered; every publish waits
    // for that read, then the event loop's turns are counted until the last one.
    let gate: Promise<void> | undefined;
    const inner = createEmbeddedProvider({ mode: "memory" });
    const queue = forwarding(inner, {
      async publish(destination, message) {
        if (destination.endsWith("/leaf.in")) {
          gate ??= (async () => {
            const executionId = destination.split("/")[2] as string;
            const rows = await lineage?.rows(executionId, { kind: "message", route: "leaf", limit: 1 });
            probe.openAtFirstPublish = rows?.total ?? -1;
            ticking = true;
            setImmediate(tick);
          })();
          await gate;
          if (++probe.leafPublishes === LARGE) {
            probe.turnsDuringPublishes = probe.turns;
            ticking = false;
          }
        }
        return inner.publish(destination, message);
      },
    });
    h = await openHarness({ queue });
    lineage = h.db.lineage;
  });
  afterAll(async () => {
    await h?.close();
  });

  it("registers every child first, in slices, and lets the event loop turn while it publishes", async () => {
    const { id, status } = await h.run(fanOutYaml("large-fan-out", LARGE, 16));
    expect(status).toBe("completed");
    expect(probe.openAtFirstPublish).toBe(LARGE);
    // Thousands of in-process publishes complete as microtasks; timers and I/O still got turns.
    expect(probe.turnsDuringPublishes).toBeGreaterThan(0);
    expect(seen.get(id) ?? []).toHaveLength(LARGE);
  });
});
