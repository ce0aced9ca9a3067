import {
  type Delivery,
  type HandlerResult,
  MAX_HANDLER_TIMEOUT_MS,
  type MessageHandler,
  MessageStatus,
} from "@factflow/protocols";
import { groupKeyOf } from "./group-key.js";
import { HandlerRuns } from "./handler-runs.js";
import { decideSettlement } from "./settlement.js";
import type { ResolvedSubscribeOptions } from "./subscribe-options.js";

/**
 * Deliveries a grouped subscription takes from the broker ahead (at least): messages queued behind a
 * group that waits for a retry sit in its lane, so the window must be wide enough for other groups'
 * messages to reach the consumer meanwhile. A backlog of one group larger than this still holds the
 * others back until it drains (documented per provider).
 */
export const GROUP_LANE_WINDOW = 1000;

interface Job {
  readonly key: string;
  readonly delivery: Delivery;
  readonly signal: AbortSignal;
  readonly resolve: (result: HandlerResult) => void;
}

/** What a grouped subscription hands the provider instead of the caller's handler and options. */
export interface GroupedSubscription {
  readonly handler: MessageHandler;
  readonly options: ResolvedSubscribeOptions;
}

/**
 * Ordered message groups, enforced by the kit on top of any provider. Messages with the same group
 * key run one at a time in the order the provider delivered them; different keys run side by side up
 * to the subscription's `concurrency`, oldest first.
 *
 * A failed attempt is retried **in place**: the delivery stays unsettled while the lane waits out the
 * backoff and runs the handler again with the next attempt number, so nothing of its group overtakes
 * it (a re-published retry would queue behind newer messages). After the last attempt the provider
 * settles it as usual (dead letter, or dropped when `deadLetter` is false). The provider therefore
 * gets `prefetch = concurrency =` at least {@link GROUP_LANE_WINDOW} (every delivery handed out
 * reaches a lane, and a waiting group does not hold the window shut), a retry budget of one
 * attempt, and the longest handler timeout; the kit applies the caller's timeout to each attempt.
 * If the process dies mid-retry, the broker redelivers the message with its original attempt number.
 */
export function groupedSubscription(
  handler: MessageHandler,
  options: ResolvedSubscribeOptions,
): GroupedSubscription {
  const waiting: Job[] = [];
  const busy = new Set<string>();
  let running = 0;
  // The caller's timeout for each attempt, on one timer; each attempt's controller from a pool when
  // the caller releases its signal.
  const attempts = new HandlerRuns({
    timeoutMs: options.handlerTimeoutMs,
    releasesSignal: options.releasesSignal,
    concurrency: options.concurrency,
  });

  const pump = (): void => {
    while (running < options.concurrency) {
      const index = waiting.findIndex((job) => !busy.has(job.key));
      if (index < 0) return;
      const [job] = waiting.splice(index, 1);
      if (job === undefined) return;
      busy.add(job.key);
      running += 1;
      void runJob(job).then((result) => {
        busy.delete(job.key);
        running -= 1;
        job.resolve(result);
        pump();
      });
    }
  };

  const runJob = async (job: Job): Promise<HandlerResult> => {
    let attempt = job.delivery.attempt;
    for (;;) {
      if (job.signal.aborted) return MessageStatus.PENDING;
      // One run under the caller's timeout, stopped when the provider's signal aborts.
      const outcome = await attempts.run(handler, { ...job.delivery, attempt }, job.signal);
      if (outcome.kind === "stopped") return MessageStatus.PENDING;
      const verdict = decideSettlement(outcome, { attempt, policy: options.retry, isTopic: false });
      if (verdict.kind === "ack") return MessageStatus.ACKNOWLEDGED;
      if (verdict.kind === "hand-back") return MessageStatus.PENDING;
      if (verdict.kind === "dead") {
        if (options.deadLetter === false) return MessageStatus.ACKNOWLEDGED;
        const status = verdict.reason === "rejected" ? MessageStatus.REJECTED : MessageStatus.FAILED;
        return { status, reason: verdict.lastError };
      }
      if (!(await pause(verdict.delayMs, job.signal))) return MessageStatus.PENDING;
      attempt = verdict.nextAttempt;
    }
  };

  const grouped: MessageHandler = (delivery, signal) =>
    new Promise<HandlerResult>((resolve) => {
      const drop = () => {
        const index = waiting.findIndex((job) => job.delivery === delivery);
        if (index >= 0) waiting.splice(index, 1);
        resolve(MessageStatus.PENDING);
      };
      // Settled: no listener left, so a provider may hand the signal to a later delivery.
      const settle = (result: HandlerResult) => {
        signal.removeEventListener("abort", drop);
        resolve(result);
      };
      waiting.push({ key: groupKeyOf(delivery.message, options), delivery, signal, resolve: settle });
      signal.addEventListener("abort", drop, { once: true });
      pump();
    });

  // What the provider must do instead: hand every prefetched delivery over, never retry or time out
  // itself, and dead-letter what it is handed (the kit already applied `deadLetter`). `requested`
  // too, as a provider with per-queue defaults reads it.
  const window = Math.max(options.prefetch, GROUP_LANE_WINDOW);
  const provider = {
    prefetch: window,
    concurrency: window,
    retry: Object.freeze({ ...options.retry, maxAttempts: 1 }),
    handlerTimeoutMs: MAX_HANDLER_TIMEOUT_MS,
  };
  return {
    handler: grouped,
    options: Object.freeze({
      ...options,
      ...provider,
      deadLetter: true,
      requested: Object.freeze({ ...options.requested, ...provider }),
    }),
  };
}

/** Waits `ms`; false when `signal` aborted first. */
function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
