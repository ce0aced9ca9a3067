import { retainedBodies } from "@factflow/infra-testkit";
import { Headers, silentLogger } from "@factflow/protocols";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { observeDeadLetterReads, REDRIVE_WINDOW_BYTES } from "../src/admin.js";
import { parseArtemisConfig } from "../src/config.js";
import { DLQ_ID_HEADER, encodeMessage, sendHeaders } from "../src/envelope-codec.js";
import { type ArtemisProvider, createArtemisProvider, endpointOf } from "../src/index.js";
import { deadLetterQueueName, resolveDestination } from "../src/naming.js";
import { StompLink } from "../src/stomp-link.js";
import { ARTEMIS_URL, registerWithArtemis, runPrefix, urlVia } from "./helpers.js";

// A dead-letter queue far larger than a page, with sizeable bodies and some letters stored twice:
// stats, a browse of one page and a redrive must hold a bounded number of messages at once (counted
// through the admin's read probe and a forced garbage collection), and the redrive must move every
// letter exactly once.

// STOMP moves these as text frames, a few MB/s on a busy machine: 2,000 x 10 KB keeps the test short,
// and the bound checked does not depend on the size.
const LETTERS = 2_000;
const BODY_BYTES = 10_000;
/** Every this many letters, one is stored a second time. */
const TWICE_EVERY = 10;
/** Messages the STOMP client may still reference when the count is taken (a network read's frames). */
const IN_TRANSIT = 10;
const destination = `/queue/${runPrefix("dlqmem")}`;

await registerWithArtemis(
  "the large dead-letter queue test",
  "dead-letter admin of a large dead-letter queue",
  () => {
    describe("dead-letter admin of a large dead-letter queue", () => {
      let provider: ArtemisProvider | undefined;
      afterEach(() => observeDeadLetterReads(undefined));
      afterAll(async () => {
        if (provider === undefined) return;
        await provider.destroy(destination).catch(() => {});
        await provider.close();
      });

      it("counts, browses a page and redrives with a bounded number of messages held, each letter once", async () => {
        provider = createArtemisProvider({ url: ARTEMIS_URL });
        const p = provider;
        await p.connect();
        const source = { destination };
        // One letter through the provider, so the dead-letter queue is its own.
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
        const twice = encoded.filter((_, i) => i % TWICE_EVERY === 0);
        const dlq = deadLetterQueueName(resolveDestination(destination));
        const config = parseArtemisConfig({ url: urlVia() });
        const link = new StompLink(endpointOf(config), config, silentLogger, "dead-letter fill");
        await link.connect();
        try {
          const all = [...encoded, ...twice];
          for (let start = 0; start < all.length; start += 100)
            await Promise.all(
              all
                .slice(start, start + 100)
                .map((e) =>
                  link.send(
                    dlq,
                    sendHeaders({ headers: { ...e.headers, [DLQ_ID_HEADER]: e.id }, delayMs: 0 }, "ANYCAST"),
                    e.body,
                    `dead letter ${e.id}`,
                  ),
                ),
            );
        } finally {
          await link.close();
        }

        const bodies = retainedBodies(100);
        // Only this queue's letters: a stats call also reads the broker's shared `DLQ` when it holds
        // more than a management page, and other test files may have letters there meanwhile.
        const own = new Set(ids);
        observeDeadLetterReads((message) => {
          if (own.has(message.headers[DLQ_ID_HEADER] ?? "")) bodies.probe(message);
        });
        bodies.start();

        expect((await p.admin.stats(source)).dlqDepth).toBe(1 + LETTERS);
        const stats = bodies.take();
        expect(stats.read, "stats read every stored copy").toBe(1 + LETTERS + twice.length);
        expect(stats.peak, "stats holds no message").toBeLessThanOrEqual(IN_TRANSIT);

        const offset = 1_500;
        const limit = 50;
        bodies.start();
        const page = await p.admin.browseDeadLetters(source, { offset, limit });
        const browse = bodies.take();
        expect(page.total).toBe(1 + LETTERS);
        expect(page.items.map((letter) => letter.message.id)).toEqual(ids.slice(offset, offset + limit));
        expect(browse.read, "browse read every letter").toBe(1 + LETTERS);
        expect(browse.peak, "browse holds a page").toBeLessThanOrEqual(limit + IN_TRANSIT);

        bodies.start();

        expect((await p.admin.redriveAll(source)).redriven).toBe(1 + LETTERS);
        const redrive = bodies.take();
        // The window counts message bytes; each letter is a little more than its body.
        const window = Math.ceil(REDRIVE_WINDOW_BYTES / BODY_BYTES) + 1;
        expect(redrive.peak, "redrive holds one window").toBeLessThanOrEqual(window + IN_TRANSIT);
        console.info("messages read and peak held:", JSON.stringify({ stats, browse, redrive }));
        expect((await p.admin.stats(source)).dlqDepth, "the dead-letter queue is empty").toBe(0);

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
  },
);
