import { MessageStatus } from "@factflow/protocols";
import { expect } from "vitest";
import { collectDeliveries } from "../collect-deliveries.js";
import { defineTest, type SuiteEnv } from "../harness.js";
import { testRetryPolicy } from "./retry.js";

const TIMEOUT_MS = 300;

/** What the handler was sent: keep a listener on its signal, or wait on the signal (first attempt only). */
interface SignalBody {
  readonly step: number;
  readonly keep?: boolean;
  readonly hang?: boolean;
}

/**
 * `releasesSignal: true` lets a provider hand a settled delivery's `AbortSignal` to a later delivery
 * instead of making a new one (the engine subscribes that way). Whether it does is the provider's
 * choice; what every provider must hold is that no delivery can see another delivery's abort: each
 * handler starts with a live signal, and a signal that was aborted (a timeout) or that a handler left
 * a listener on never reaches another delivery.
 */
export function registerReleasedSignals(env: SuiteEnv): void {
  defineTest(env, "released-signals", {
    title:
      "with releasesSignal, every delivery starts with a live signal, and an aborted or still-watched signal never reaches another delivery",
    timeoutMs: 60_000,
    body: async (h) => {
      const provider = await h.provider();
      const queue = h.queue("signals");
      const signals: AbortSignal[] = [];
      const liveAtStart: boolean[] = [];
      const recorder = collectDeliveries(async (delivery, signal) => {
        signals.push(signal);
        liveAtStart.push(!signal.aborted);
        const body = delivery.message.body as unknown as SignalBody;
        if (body.keep === true) signal.addEventListener("abort", () => {});
        if (body.hang === true && delivery.attempt === 1)
          await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        return MessageStatus.ACKNOWLEDGED;
      });
      await h.subscribe(provider, queue, recorder.handler, {
        subscription: "signals",
        releasesSignal: true,
        prefetch: 1,
        concurrency: 1,
        handlerTimeoutMs: TIMEOUT_MS,
        retry: { ...testRetryPolicy(env, h.caps.delayGranularityMs), maxAttempts: 3 },
      });
      const steps: SignalBody[] = [
        { step: 0 },
        { step: 1 },
        { step: 2, keep: true },
        { step: 3 },
        { step: 4, hang: true },
        { step: 5 },
        { step: 6 },
      ];
      let expected = 0;
      for (const body of steps) {
        await provider.publish(queue, { body: { ...body } });
        // One at a time, so each delivery comes after the previous one has settled; the hanging one
        // comes twice (its timed-out first attempt, then the retry).
        expected += body.hang === true ? 2 : 1;
        await recorder.waitForCount(expected, { timeoutMs: 30_000 });
        await recorder.waitForIds(recorder.ids(), { status: "ACKNOWLEDGED", timeoutMs: 30_000 });
      }
      const bodies = recorder.deliveries.map((d) => d.body as unknown as SignalBody);
      expect(liveAtStart.every(Boolean), "every handler starts with a signal that is not aborted").toBe(true);
      // A signal may have served earlier deliveries (it was clean then): what counts is that it
      // serves none after the delivery that kept a listener on it, or whose timeout aborted it.
      const keptAt = bodies.findIndex((b) => b.keep === true);
      const hungAt = bodies.findIndex((b) => b.hang === true);
      const kept = signals[keptAt];
      const hung = signals[hungAt];
      expect(hung?.aborted, "the timed-out attempt's signal was aborted").toBe(true);
      expect(kept?.aborted, "no other delivery's fate aborted the signal a handler kept").toBe(false);
      expect(signals.lastIndexOf(kept as AbortSignal), "a signal with a listener left is not reused").toBe(
        keptAt,
      );
      expect(signals.lastIndexOf(hung as AbortSignal), "an aborted signal is not reused").toBe(hungAt);
    },
  });
}
