import type { QueueProtocol } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { createFaultProxy, type FaultProxy } from "../fault-proxy.js";
import { defineTest, type SuiteEnv, type TestHarness } from "../harness.js";
import { errorText, sleep, waitFor } from "../wait-for.js";
import { field, range } from "./util.js";

/** Every this-many-th message of the stream is rejected, so the dead-letter path is under fault too. */
const REJECT_EVERY = 20;

/** True for the stream messages the handler rejects. */
function shouldReject(index: number): boolean {
  return index % REJECT_EVERY === REJECT_EVERY - 1;
}

/** Publishes the stream keeps unconfirmed at once. */
const PUBLISH_LANES = 8;

/** Publishes with a fixed id, retrying rejected publishes (a rejection may still have reached the broker: a duplicate, never a loss). */
export async function publishUntilTaken(
  current: () => QueueProtocol,
  destination: string,
  id: string,
  n: number,
  deadline: number,
): Promise<number> {
  let failures = 0;
  for (;;) {
    try {
      await current().publish(destination, { id, body: { n } });
      return failures;
    } catch (error) {
      failures += 1;
      if (Date.now() > deadline) {
        throw new Error(
          `[factflow/infra-testkit] publish of stream message ${n} kept failing: ${errorText(error)}`,
        );
      }
      await sleep(100);
    }
  }
}

export function registerFaults(env: SuiteEnv): void {
  const faults = env.options.faults;
  const n = env.options.timing.faultMessages;
  defineTest(env, "faults", {
    title: `a stream of ${n} messages survives ${faults.kind === "tcp" ? "its connections being cut twice" : "a provider restart"}: every message acked or dead-lettered, none lost`,
    timeoutMs: 60_000 + env.options.expectations.recoveryWithinMs * 2,
    notRunWhen: (caps) => {
      if (faults.kind === "none") return faults.reason;
      if (faults.kind === "restart" && !caps.durable)
        return "capabilities.durable is false: a restart loses messages by design";
      return undefined;
    },
    body: async (h) => {
      if (faults.kind === "none") return;
      let proxy: FaultProxy | undefined;
      try {
        if (faults.kind === "tcp") proxy = await createFaultProxy({ target: faults.target });
        await runStream(
          h,
          proxy,
          faults.kind === "restart" ? (faults.crash ?? ((p) => p.close())) : undefined,
        );
      } finally {
        await proxy?.close();
      }
    },
  });
}

async function runStream(
  h: TestHarness,
  proxy: FaultProxy | undefined,
  crash: ((provider: QueueProtocol) => Promise<void>) | undefined,
): Promise<void> {
  const count = h.timing.faultMessages;
  const override = proxy === undefined ? undefined : { host: proxy.host, port: proxy.port };
  const queue = h.queue("faults");
  const source = { destination: queue };
  const recorder = collectDeliveries(async (delivery) => {
    await sleep(2);
    return shouldReject(Number(field(delivery.message.body, "n"))) ? "REJECTED" : "ACKNOWLEDGED";
  });
  const options = {
    subscription: "stream",
    prefetch: 8,
    concurrency: 4,
    retry: { maxAttempts: 5, initialDelayMs: 100 },
  };
  let provider = await h.provider(override);
  const used = [provider];
  await h.subscribe(provider, queue, recorder.handler, options);

  const ids = range(count).map((i) => `${h.env.runId}-stream-${i}`);
  const deadline = Date.now() + h.expectations.recoveryWithinMs;
  let publishFailures = 0;
  const faultAt: number[] = [];
  const half = Math.floor(count / 2);
  const threeQuarters = Math.floor((count * 3) / 4);
  // Publishes go out in lanes, so several are unconfirmed at the moment of a fault: a publish may
  // resolve only if the broker really has the message.
  for (let start = 0; start < count; start += PUBLISH_LANES) {
    const lane = ids.slice(start, start + PUBLISH_LANES);
    const covers = (i: number) => start <= i && i < start + lane.length;
    if (covers(half)) {
      // Break things while deliveries are in flight, not before consumption started.
      await recorder.waitForCount(Math.floor(count / 4), { timeoutMs: h.timing.deliveryTimeoutMs });
    }
    if (proxy !== undefined && covers(threeQuarters)) {
      // A second cut once the provider is consuming again: recovery must survive being broken twice.
      await recorder.waitForCount(half, { timeoutMs: h.expectations.recoveryWithinMs });
    }
    const inFlight = lane.map((id, k) => publishUntilTaken(() => provider, queue, id, start + k, deadline));
    if (covers(half) || (proxy !== undefined && covers(threeQuarters))) {
      faultAt.push(recorder.deliveries.length);
      if (proxy !== undefined) {
        const cut = proxy.cutAll();
        expect(cut, "the provider had a connection through the proxy to cut").toBeGreaterThan(0);
      } else if (crash !== undefined) {
        await crash(provider);
        const next = await h.provider();
        used.push(next);
        await h.subscribe(next, queue, recorder.handler, options);
        provider = next;
      }
    }
    for (const failures of await Promise.all(inFlight)) publishFailures += failures;
  }

  const acked = (id: string) => recorder.deliveries.some((d) => d.id === id && d.outcome === "ACKNOWLEDGED");
  let dead = new Map<string, number>();
  // Accounted for: acknowledged by the handler, or sitting in the dead-letter queue.
  const missing = (): string[] => ids.filter((id) => !acked(id) && !dead.has(id));
  try {
    await waitFor(
      async () => {
        dead = new Map();
        for (const letter of await h.allDeadLetters(provider, source)) {
          dead.set(letter.message.id, (dead.get(letter.message.id) ?? 0) + 1);
        }
        return missing().length === 0;
      },
      {
        timeoutMs: h.expectations.recoveryWithinMs,
        intervalMs: 250,
        description: "every stream message to be accounted for",
      },
    );
  } catch (error) {
    const lost = missing();
    throw new Error(
      `[factflow/infra-testkit] ${lost.length} of ${count} messages lost after the fault (neither acknowledged nor dead-lettered), e.g. ${lost.slice(0, 5).join(", ")}`,
      { cause: error },
    );
  }
  await h.quiet();

  const duplicateDeliveries = recorder.deliveries.length - count;
  const ackedTwice = ids.filter(
    (id) => recorder.deliveries.filter((d) => d.id === id && d.outcome === "ACKNOWLEDGED").length > 1,
  );
  const deadTwice = [...dead].filter(([, c]) => c > 1).map(([id]) => id);
  const crossed = ids.filter((id, i) => !shouldReject(i) && dead.has(id));
  h.note(
    `faults (${proxy === undefined ? "restart" : "tcp cut"}): ${count} messages, fault${faultAt.length > 1 ? "s" : ""} after ${faultAt.join(" and ")} deliveries; ` +
      `${recorder.deliveries.length} deliveries (${duplicateDeliveries} beyond one each), ${ackedTwice.length} acknowledged twice, ` +
      `${deadTwice.length} dead-lettered twice, ${publishFailures} publish retries` +
      (proxy === undefined ? "" : `, ${proxy.acceptedConnections()} connections through the proxy`),
  );
  if (crossed.length > 0) {
    // Not a loss: e.g. a delivery cut mid-handler too often may be dead-lettered as incomplete.
    h.note(
      `faults: ${crossed.length} messages the handler never rejected are in the DLQ, e.g. ${crossed[0]}`,
    );
  }
  for (const [i, p] of used.entries()) {
    let c: ReturnType<QueueProtocol["counters"]>;
    try {
      c = p.counters();
    } catch {
      // A crashed provider may refuse every call after close; its counters are then unreadable.
      continue;
    }
    h.note(
      `faults: counters of provider ${i + 1}: published ${c.published}, confirmed ${c.confirmed}, acked ${c.acked}, redelivered ${c.redelivered}, superseded ${c.superseded}, lost ${c.lost}`,
    );
    expect(c.lost, "the provider's own count of messages it could not preserve").toBe(0);
  }
  const unknown = recorder.ids().filter((id) => !ids.includes(id));
  expect(unknown, "no message the stream did not publish").toEqual([]);
}
