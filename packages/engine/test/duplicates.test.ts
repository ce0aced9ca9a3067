import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { ProviderError, type QueueProtocol } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliveryLedger } from "../src/delivery/delivery-ledger.js";
import { childMessageId } from "../src/ids.js";
import { forwarding, type Harness, openHarness, seen } from "./harness.js";

const ITEMS = 10;
const PARTS = 3;

/** root splits ITEMS items to `mid`; mid records (sink) and splits each into PARTS leaf messages. */
const pipeline = (name: string) => `
name: ${name}
settings:
  retry: { max_attempts: 4, initial_delay_ms: 10, multiplier: 1 }
init:
  route: root
  message:
    items: [${Array.from({ length: ITEMS }, (_, i) => `{ n: ${i}, parts: [${Array.from({ length: PARTS }, (_, p) => p).join(", ")}] }`).join(", ")}]
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [mid.in]
  mid:
    inbound: { queue: mid.in, concurrency: 4 }
    adapters: [{ type: sink }, { type: split, config: { field: parts } }]
    outbound: [leaf.in]
  leaf:
    inbound: { queue: leaf.in, concurrency: 4 }
    adapters: [{ type: sink }]
`;

/**
 * The real embedded provider, with a hook on every publish: it may publish the message a second
 * time (a duplicate with the same id, as a broker redelivery would hand out) or fail the publish.
 */
interface Tap {
  mode: "none" | "duplicate-mid" | "duplicate-batch" | "fail-second-leaf" | "late-redelivery-mid";
  published: Map<string, string[]>;
  leafPublishes: number;
}

function tapped(inner: QueueProtocol, tap: Tap): QueueProtocol {
  return forwarding(inner, {
    // A late copy is handed to the engine flagged the way a broker flags a redelivery.
    subscribe: (destination, handler, options) =>
      inner.subscribe(
        destination,
        (delivery, signal) =>
          handler(
            delivery.message.headers["x-test-copy"] === undefined
              ? delivery
              : { ...delivery, redelivered: true },
            signal,
          ),
        options,
      ),
    async publish(destination, message) {
      const queue = destination.split("/").at(-1) ?? destination;
      if (queue === "leaf.in" && tap.mode === "fail-second-leaf" && ++tap.leafPublishes === 2)
        throw new ProviderError("test", "connection", "publish lost on purpose", { retryable: true });
      // Both copies are handed over before either is awaited, so they sit next to each other.
      const copy =
        queue === "bat.in" && tap.mode === "duplicate-batch"
          ? inner.publish(destination, message)
          : undefined;
      const result = await inner.publish(destination, message);
      await copy;
      const ids = tap.published.get(queue) ?? [];
      ids.push(message.id ?? "");
      tap.published.set(queue, ids);
      if (queue === "mid.in" && tap.mode === "duplicate-mid") await inner.publish(destination, message);
      if (queue === "mid.in" && tap.mode === "late-redelivery-mid") {
        // Arrives once the original has settled and its row is committed.
        const headers = { ...message.headers, "x-test-copy": "1" };
        await inner.publish(destination, { ...message, headers, delayMs: 150 });
      }
      return result;
    },
  });
}

describe("duplicate deliveries", () => {
  let h: Harness;
  const tap: Tap = { mode: "none", published: new Map(), leafPublishes: 0 };
  beforeAll(async () => {
    h = await openHarness({ queue: tapped(createEmbeddedProvider({ mode: "memory" }), tap) });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("derives child ids from parent, route, queue and position", () => {
    const a = childMessageId("p-1", "mid", "leaf.in", 0);
    expect(a).toBe(childMessageId("p-1", "mid", "leaf.in", 0));
    expect(a).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const others = [
      childMessageId("p-2", "mid", "leaf.in", 0),
      childMessageId("p-1", "root", "leaf.in", 0),
      childMessageId("p-1", "mid", "other.in", 0),
      childMessageId("p-1", "mid", "leaf.in", 1),
    ];
    expect(new Set([a, ...others]).size).toBe(5);
  });

  it("acknowledges a second copy of a message without re-running its route", async () => {
    tap.mode = "duplicate-mid";
    tap.published.clear();
    const { id, status, events } = await h.run(pipeline("dup-publish"));
    tap.mode = "none";
    expect(status).toBe("completed");
    const calls = seen.get(id) ?? [];
    // Every mid message arrived twice; its adapters ran once.
    expect(calls.filter((c) => c.route === "mid")).toHaveLength(ITEMS);
    expect(calls.filter((c) => c.route === "leaf")).toHaveLength(ITEMS * PARTS);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["mid.duplicates"]).toBe(ITEMS);
    expect(counters["mid.acknowledged"]).toBe(ITEMS);
    const leafIds = tap.published.get("leaf.in") ?? [];
    expect(new Set(leafIds).size).toBe(ITEMS * PARTS);
    const messages = await h.rows(id, "message");
    expect(messages.filter((r) => r.route === "mid" && r.status === "completed")).toHaveLength(ITEMS);
    expect(messages.filter((r) => r.route === "leaf" && r.status === "completed")).toHaveLength(
      ITEMS * PARTS,
    );
  });

  it("acknowledges the copies of messages held in a batch at once, so the batch still fills", async () => {
    // Every message reaches bat.in twice in a row. The route runs 3 handlers at once (the batch's
    // size): a copy that waited for its held original would keep a handler from the message that
    // fills the batch, and with a 10-minute batch timer the run would not end.
    tap.mode = "duplicate-batch";
    const { id, status, events } = await h.run(`
name: dup-batch
init: { route: root, message: { items: [1, 2, 3, 4, 5, 6] } }
routes:
  root:
    inbound: { queue: root.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [bat.in]
  bat:
    inbound: { queue: bat.in, concurrency: 1 }
    adapters:
      - { type: batch, config: { size: 3, timeout_ms: 600000 } }
      - { type: sink }
`);
    tap.mode = "none";
    expect(status).toBe("completed");
    const batches = (seen.get(id) ?? []).filter((c) => c.route === "bat");
    expect(batches.map((c) => (c.body as { count: number }).count)).toEqual([3, 3]);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["bat.duplicates"]).toBe(6);
    expect(counters["bat.acknowledged"]).toBe(6);
  });

  it("re-runs a delivery whose publish failed under the same child ids, without a second generation", async () => {
    tap.mode = "fail-second-leaf";
    tap.leafPublishes = 0;
    tap.published.clear();
    const { id, status } = await h.run(pipeline("dup-rerun"));
    tap.mode = "none";
    expect(status).toBe("completed");
    const calls = seen.get(id) ?? [];
    // One mid delivery ran twice (its publish failed, it was retried); every leaf message ran once.
    expect(calls.filter((c) => c.route === "mid")).toHaveLength(ITEMS + 1);
    expect(calls.filter((c) => c.route === "leaf")).toHaveLength(ITEMS * PARTS);
    // The retry republished the child that was lost under the id its first run gave it.
    const leafIds = tap.published.get("leaf.in") ?? [];
    expect(new Set(leafIds).size).toBe(ITEMS * PARTS);
    const messages = await h.rows(id, "message");
    const leafRows = messages.filter((r) => r.route === "leaf");
    expect(leafRows).toHaveLength(ITEMS * PARTS);
    expect(leafRows.every((r) => r.status === "completed")).toBe(true);
  });
});

describe("redeliveries the process no longer remembers", () => {
  let h: Harness;
  const tap: Tap = { mode: "late-redelivery-mid", published: new Map(), leafPublishes: 0 };
  let lookups = 0;
  beforeAll(async () => {
    h = await openHarness({
      queue: tapped(createEmbeddedProvider({ mode: "memory" }), tap),
      // Remember one settled id only: the rest must be recognised through lineage.
      settledMemory: 1,
      wrapLineage: (lineage) =>
        new Proxy(lineage, {
          get(target, key) {
            const value = Reflect.get(target, key, target);
            if (key === "messageStatus") lookups++;
            return typeof value === "function" ? value.bind(target) : value;
          },
        }),
    });
  });
  afterAll(async () => {
    await h?.close();
  });

  it("are acknowledged from the committed lineage row without re-running the route", async () => {
    // A slow leaf keeps the execution open until the late copies of the mid messages arrive.
    const yaml = pipeline("late-redelivery")
      .replace("adapters: [{ type: sink }]\n", "adapters: [{ type: track }, { type: sink }]\n")
      .replace("queue: leaf.in, concurrency: 4", "queue: leaf.in, concurrency: 1");
    const { id, status, events } = await h.run(yaml);
    expect(status).toBe("completed");
    const calls = seen.get(id) ?? [];
    expect(calls.filter((c) => c.route === "mid")).toHaveLength(ITEMS);
    expect(calls.filter((c) => c.route === "leaf")).toHaveLength(ITEMS * PARTS);
    const counters = ((events.at(-1)?.data ?? {}) as { counters?: Record<string, number> }).counters ?? {};
    expect(counters["mid.duplicates"]).toBe(ITEMS);
    // The ledger held one id at most; the others were looked up.
    expect(lookups).toBeGreaterThanOrEqual(ITEMS - 1);
  });
});

describe("DeliveryLedger", () => {
  it("treats a completed id as a duplicate, and a dead letter's redrive (attempt 1, fresh) as new work", () => {
    const ledger = new DeliveryLedger(2);
    expect(ledger.classify("a", 1, false)).toBe("fresh");
    ledger.settle("a", "completed", 1);
    expect(ledger.classify("a", 1, false)).toBe("duplicate");
    ledger.settle("b", "failed", 3);
    expect(ledger.classify("b", 3, true)).toBe("duplicate");
    expect(ledger.classify("b", 1, false)).toBe("fresh");
    // Bounded: the oldest settlement is forgotten.
    ledger.settle("c", "completed", 1);
    expect(ledger.settled("a")).toBeUndefined();
    expect(ledger.classify("c", 1, true)).toBe("duplicate");
  });

  it("remembers at most `capacity` settlements, forgetting the oldest first, however many pass", () => {
    const ledger = new DeliveryLedger(3);
    for (let i = 0; i < 10; i++) ledger.settle(`m${i}`, "completed", 1);
    expect([...Array(10).keys()].filter((i) => ledger.isSettled(`m${i}`))).toEqual([7, 8, 9]);
    // A reopened failure settled again stays remembered until its newest place comes round.
    ledger.settle("f", "failed", 2);
    ledger.reopen("f");
    ledger.settle("f", "completed", 1);
    expect(ledger.settled("f")).toEqual({ outcome: "completed", attempt: 1 });
    expect(ledger.isSettled("m8")).toBe(false);
    ledger.settle("n", "completed", 1);
    expect(ledger.isSettled("m9")).toBe(false);
    expect(ledger.isSettled("n")).toBe(true);
  });

  it("lets a second copy wait for the first to finish, and gives up on abort", async () => {
    const ledger = new DeliveryLedger();
    const never = new AbortController().signal;
    expect(await ledger.claim("x", [never])).toBe("claimed");
    let second = "";
    const waiting = ledger.claim("x", [never]).then((claim) => {
      second = claim;
    });
    await new Promise((r) => setImmediate(r));
    expect(second).toBe("");
    ledger.release("x");
    await waiting;
    expect(second).toBe("claimed");
    const abort = new AbortController();
    const third = ledger.claim("x", [never, abort.signal]);
    abort.abort();
    expect(await third).toBe("aborted");
  });

  it("answers a copy of a message parked in a batch as covered, at the parked attempt or earlier", async () => {
    const ledger = new DeliveryLedger();
    const never = new AbortController().signal;
    expect(await ledger.claim("x", [never])).toBe("claimed");
    // Waiting before the holder parks: woken by the park.
    const early = ledger.claim("x", [never], 2);
    const later = ledger.claim("x", [never], 3);
    ledger.park("x", 2);
    expect(await early).toBe("covered");
    expect(await ledger.claim("x", [never], 1)).toBe("covered");
    // A later attempt is not the parked one's to settle: it waits for the claim.
    ledger.unpark("x");
    expect(ledger.isCovered("x", 2)).toBe(false);
    ledger.release("x");
    expect(await later).toBe("claimed");
  });
});
