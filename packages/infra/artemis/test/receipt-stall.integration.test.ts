import { createFaultProxy, type FaultProxy, waitFor } from "@factflow/infra-testkit";
import { type Delivery, type HandlerResult, type Logger, silentLogger } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { type ArtemisProvider, createArtemisProvider } from "../src/index.js";
import {
  ARTEMIS_HOST,
  ARTEMIS_PORT,
  ARTEMIS_URL,
  registerWithArtemis,
  runPrefix,
  urlVia,
} from "./helpers.js";

const PREFIX = runPrefix("stall");
const queues: string[] = [];

/** A logger that keeps warnings, so the test can see the provider give up on a copy. */
function recordingLogger(warnings: string[]): Logger {
  const logger: Logger = {
    ...silentLogger,
    warn: (message) => {
      warnings.push(message);
    },
    child: () => logger,
  };
  return logger;
}

function registerTests(): void {
  describe("no RECEIPT for a retry copy → the original stays unsettled (real Artemis, stalled link)", () => {
    const proxies: FaultProxy[] = [];

    afterAll(async () => {
      for (const proxy of proxies) await proxy.close();
      const cleaner = createArtemisProvider({ url: ARTEMIS_URL });
      await cleaner.connect();
      for (const queue of queues) await cleaner.destroy(queue).catch(() => {});
      await cleaner.close();
    });

    for (const longStall of [false, true]) {
      it(longStall
        ? "the stall outlasts the heart-beat: the link is dropped, the held copy dies with it, the broker redelivers the original; nothing lost"
        : "the link stalls between the copy's SEND and its RECEIPT: no ACK of the original, which is redelivered after recovery; nothing lost", async () => {
        const QUEUE = `/queue/${PREFIX}/${longStall ? "long" : "short"}`;
        queues.push(QUEUE);
        const stalled = await createFaultProxy({ target: { host: ARTEMIS_HOST, port: ARTEMIS_PORT } });
        proxies.push(stalled);
        const warnings: string[] = [];
        const copiesConfirmed: string[] = [];
        const p: ArtemisProvider = createArtemisProvider(
          { url: urlVia(stalled), heartbeatMs: 1_000, receiptTimeoutMs: 800, reconnectDelayMs: 100 },
          {
            logger: recordingLogger(warnings),
            afterCopyConfirmed: ({ what }) => {
              copiesConfirmed.push(what);
            },
          },
        );
        const observer = createArtemisProvider({ url: ARTEMIS_URL });
        await Promise.all([p.connect(), observer.connect()]);
        try {
          const seen: { attempt: number; redelivered: boolean; at: "before" | "after" }[] = [];
          let resumed = false;
          await p.subscribe(
            QUEUE,
            (delivery: Delivery): HandlerResult => {
              seen.push({
                attempt: delivery.attempt,
                redelivered: delivery.redelivered,
                at: resumed ? "after" : "before",
              });
              if (seen.length > 1) return "ACKNOWLEDGED";
              // The first delivery fails; its retry copy's SEND is the next frame, and it is held.
              stalled.stall();
              return "FAILED";
            },
            { subscription: "stalled", retry: { maxAttempts: 3, initialDelayMs: 200 } },
          );
          const { id } = await observer.publish(QUEUE, { body: { job: "keep me" } });

          // The copy gets no RECEIPT; the silent link is then given up (heartbeats) or the copy times out.
          await waitFor(() => warnings.length > 0, {
            timeoutMs: 15_000,
            description: "the provider to notice the missing RECEIPT or the dead link",
          });
          expect(copiesConfirmed, "no copy was confirmed while stalled").toEqual([]);
          expect(p.counters().retried).toBe(0);
          expect(p.counters().acked).toBe(0);
          // The broker still holds the original: nothing was acknowledged.
          const held = await observer.admin.stats({ destination: QUEUE });
          expect(
            held.depth + held.inFlight,
            `the original is still on the broker (${JSON.stringify(held)})`,
          ).toBe(1);

          if (longStall) {
            // Keep the link silent until the client gives it up (heart-beat) and tries a new one.
            await waitFor(() => stalled.acceptedConnections() > 1, {
              timeoutMs: 20_000,
              description: "the client to drop the silent link and reconnect",
            });
            expect(copiesConfirmed).toEqual([]);
          }
          resumed = true;
          stalled.resume();
          await waitFor(
            async () => {
              const s = await observer.admin.stats({ destination: QUEUE });
              return seen.some((d) => d.at === "after") && s.depth === 0 && s.inFlight === 0;
            },
            { timeoutMs: 30_000, intervalMs: 200, description: "recovery and settlement" },
          );
          const after = seen.filter((d) => d.at === "after");
          console.info(
            `[factflow/artemis] ${longStall ? "long" : "short"} stall: deliveries ${JSON.stringify(seen)}; warnings ${JSON.stringify(warnings)}`,
          );
          expect(
            after.some((d) => d.attempt === 1),
            `the original (attempt 1) came back: ${JSON.stringify(seen)}`,
          ).toBe(true);
          expect(
            after.filter((d) => d.attempt === 2).length,
            "the held copy, if it got through at all",
          ).toBeLessThanOrEqual(longStall ? 0 : 1);
          const final = await observer.admin.stats({ destination: QUEUE });
          expect(final).toMatchObject({ depth: 0, inFlight: 0, dlqDepth: 0 });
          expect(p.counters().lost).toBe(0);
          expect(seen.every((d) => d.attempt <= 2)).toBe(true);
          expect(id).toBeTruthy();
        } finally {
          await Promise.all([p.close(), observer.close()]);
        }
      }, 180_000);
    }
  });
}

await registerWithArtemis(
  "receipt-stall tests",
  "no RECEIPT for a retry copy → the original stays unsettled (real Artemis)",
  registerTests,
);
