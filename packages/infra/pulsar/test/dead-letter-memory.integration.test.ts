import { randomUUID } from "node:crypto";
import { retainedBodies } from "@factflow/infra-testkit";
import { Headers } from "@factflow/protocols";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { observeDeadLetterReads, PEEK_WINDOW, REDRIVE_BATCH } from "../src/admin.js";
import { encodeMessage } from "../src/codec.js";
import {
  createPulsarProvider,
  type PulsarProvider,
  parsePulsarConfig,
  routeOf,
  WsTransport,
} from "../src/index.js";
import { Producers } from "../src/producers.js";
import { pulsarAvailability, urlVia } from "./helpers.js";

// A dead-letter topic far larger than a page, with sizeable bodies and some letters stored twice:
// stats, a browse of one page and a redrive must hold a bounded number of copies at once (counted
// through the admin's read probe and a forced garbage collection), and the redrive must move every
// letter exactly once.

const available = await pulsarAvailability();
// Each stored copy costs a count or a browse one REST peek, so fewer letters than on other brokers
// keep the test short on a busy machine; the bound checked does not depend on the number.
const LETTERS = 2_000;
const BODY_BYTES = 20_000;
/** Every this many letters, one is stored a second time. */
const TWICE_EVERY = 10;
/** Copies the WebSocket client or a settled request may still reference when the count is taken. */
const IN_TRANSIT = 10;
const destination = `/queue/dlqmem-${randomUUID().slice(0, 8)}`;
let provider: PulsarProvider | undefined;

afterEach(() => observeDeadLetterReads(undefined));
afterAll(async () => {
  if (provider === undefined) return;
  await provider.destroy(destination).catch(() => {});
  await provider.close();
});

/** Sends payloads straight to a topic, as the provider stores a dead letter. */
async function sendAll(topic: string, payloads: readonly string[]): Promise<void> {
  const config = parsePulsarConfig({ url: urlVia() });
  const transport = new WsTransport({
    url: config.url,
    tenant: config.tenant,
    namespace: config.namespace,
    connectTimeoutMs: config.connectTimeoutMs,
    pingIntervalMs: config.pingIntervalMs,
  });
  const producers = new Producers(transport, 30_000);
  try {
    for (let start = 0; start < payloads.length; start += 200)
      await Promise.all(
        payloads.slice(start, start + 200).map((payload) => producers.send(topic, { payload })),
      );
  } finally {
    producers.closeAll();
    transport.closeAll();
  }
}

describe.skipIf(!available.ok)("dead-letter admin of a large dead-letter topic", () => {
  it("counts, browses a page and redrives with a bounded number of copies held, each letter once", async () => {
    provider = createPulsarProvider({ url: urlVia(), publishTimeoutMs: 30_000 });
    const p = provider;
    await p.connect();
    const source = { destination };
    const route = routeOf(destination, "admin");
    // One letter through the provider, so the dead-letter topic and subscription are its own.
    const rejecter = await p.subscribe(destination, async () => "REJECTED" as const, {
      subscription: "admin",
    });
    const seed = (await p.publish(destination, { body: "seed" })).id;
    for (let i = 0; (await p.admin.stats(source)).dlqDepth !== 1; i++) {
      if (i > 200) throw new Error("the seed dead letter did not arrive");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await rejecter.unsubscribe();

    const pad = "x".repeat(BODY_BYTES);
    const encoded = Array.from({ length: LETTERS }, (_, i) =>
      encodeMessage(
        destination,
        { body: { i, pad }, headers: { [Headers.deadLetterReason]: "rejected" } },
        1 << 20,
      ),
    );
    const ids = [seed, ...encoded.map((e) => e.id)];
    const twice = encoded.filter((_, i) => i % TWICE_EVERY === 0).map((e) => e.payload);
    await sendAll(route.deadLetterTopic, [...encoded.map((e) => e.payload), ...twice]);

    const bodies = retainedBodies(100);
    observeDeadLetterReads((copy) => bodies.probe(copy));
    bodies.start();

    expect((await p.admin.stats(source)).dlqDepth).toBe(1 + LETTERS);
    const stats = bodies.take();
    expect(stats.read, "stats read every stored copy").toBe(1 + LETTERS + twice.length);
    expect(stats.peak, "stats holds one peek window").toBeLessThanOrEqual(PEEK_WINDOW + IN_TRANSIT);

    const offset = 1_500;
    const limit = 50;
    bodies.start();
    const page = await p.admin.browseDeadLetters(source, { offset, limit });
    const browse = bodies.take();
    expect(page.total).toBe(1 + LETTERS);
    expect(page.items.map((letter) => letter.message.id)).toEqual(ids.slice(offset, offset + limit));
    expect(browse.peak, "browse holds one peek window").toBeLessThanOrEqual(PEEK_WINDOW + IN_TRANSIT);

    bodies.start();

    expect((await p.admin.redriveAll(source)).redriven).toBe(1 + LETTERS);
    const redrive = bodies.take();
    expect(redrive.peak, "redrive holds one batch").toBeLessThanOrEqual(REDRIVE_BATCH + IN_TRANSIT);
    console.info("copies read and peak held:", JSON.stringify({ stats, browse, redrive }));
    expect((await p.admin.stats(source)).dlqDepth, "the dead-letter topic is empty").toBe(0);

    const seen: string[] = [];
    const all = new Promise<void>((resolve) => {
      void p.subscribe(
        destination,
        async (delivery) => {
          seen.push(delivery.message.id);
          if (seen.length === 1 + LETTERS) resolve();
          return "ACKNOWLEDGED" as const;
        },
        { subscription: "admin" },
      );
    });
    await all;
    for (let i = 0; (await p.admin.stats(source)).depth !== 0; i++) {
      if (i > 400) throw new Error("the redriven letters were not all consumed");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(seen.length, "each letter redriven once").toBe(1 + LETTERS);
    expect(new Set(seen)).toEqual(new Set(ids));
  }, 120_000);
});
