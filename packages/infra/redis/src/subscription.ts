import {
  type DeadLetterReason,
  type Delivery,
  type DurabilityCounters,
  errorText,
  type Logger,
  type MessageHandler,
  ProviderError,
  type RetryPolicy,
  type SettlementListener,
  type Subscription,
} from "@factflow/protocols";
import {
  type DeadLetterOrigin,
  deadLetterHeaders,
  decideSettlement,
  HandlerRuns,
  once,
  retryHeaders,
  SettlementReport,
  type SettlementVerdict,
  settleWithin,
  undecodableVerdict,
} from "@factflow/provider-kit";
import type { Redis } from "ioredis";
import { AckBatcher } from "./ack-batch.js";
import { classifyRedisError } from "./classify-error.js";
import { decodeEntry, type RawEntry, rawEntry } from "./codec.js";
import type { RedisConfig } from "./config.js";
import { corkUntilNextTurn } from "./connections.js";
import type { DelayedPump } from "./delayed-pump.js";
import { escapeSubscription, GROUP, type LaneKeys } from "./naming.js";
import { readCount } from "./read-window.js";
import { CLAIM_DEAD, JOIN, LEAVE, REAP, runScript, SETTLE, SETTLE_ACKS, TOUCH } from "./scripts.js";
import { sleep } from "./timing.js";

/** Longest one shutdown step (hand-backs, leaving the group) may wait on Redis. */
const SHUTDOWN_STEP_MS = 2_000;

/** A delivered entry this consumer holds and has not settled. */
interface Held {
  readonly entryId: string;
  readonly raw: RawEntry;
  /** Handed out before: reclaimed from a dead consumer, or recovered after a lost reply. */
  readonly redelivered: boolean;
  /** Who the verdict is reported for: set when the entry is handed to the handler. */
  settled?: { readonly messageId: string | undefined; readonly attempt: number };
}

/** Entries of one stream in an XREADGROUP / XAUTOCLAIM reply; deleted entries have no fields. */
type StreamEntries = readonly (readonly [string, string[] | null])[];

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: RedisConfig;
  /** The shared command connection (publishes, settlements, heartbeats). */
  readonly redis: Redis;
  /** Opens the subscription's own connection for its blocking reads. */
  readonly openReader: () => Redis;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  readonly lane: LaneKeys;
  /** This subscription's consumer name in the group; unique per subscription. */
  readonly consumer: string;
  readonly pump: DelayedPump;
  /** Name prefixes of consumers known to be dead (their server's cluster lease expired). */
  readonly deadConsumers: () => readonly string[];
  readonly onStop: (subscription: RedisSubscription) => void;
}

/** Settings fixed at subscribe time. */
export interface SubscriptionSettings {
  readonly subscription: string;
  readonly handler: MessageHandler;
  readonly prefetch: number;
  readonly concurrency: number;
  readonly policy: RetryPolicy;
  readonly handlerTimeoutMs: number;
  /** The subscriber lets go of its signal once it settles (see the kit's `SignalPool`). */
  readonly releasesSignal?: boolean;
  /** The subscriber's `onSettled`. */
  readonly onSettled?: SettlementListener | undefined;
}

/**
 * One consumer of one lane's consumer group. A loop on a dedicated connection reads new entries
 * with a blocking `XREADGROUP`, never holding more than `prefetch` unsettled; at most `concurrency`
 * handlers run and the rest wait in arrival order. Each delivery is settled by one Lua script as
 * the kit decides: XACK, or a retry / dead-letter / hand-back copy written in the same script as the
 * XACK. A heartbeat keeps the entries it holds fresh; a reclaim pass takes over entries of consumers
 * that have been silent past the visibility timeout (`XAUTOCLAIM`), and at once those of consumers
 * the provider was told are dead (`claimFromNode`).
 */
export class RedisSubscription implements Subscription {
  readonly destination: string;
  readonly name: string;
  private readonly held = new Map<string, Held>();
  private backlog: Held[] = [];
  private running = 0;
  private stopped = false;
  private stopping: Promise<void> | undefined;
  private reader: Redis | undefined;
  private loopDone: Promise<void> = Promise.resolve();
  /** Running handlers, whose timeouts share one timer. */
  private readonly handlers: HandlerRuns;
  private readonly active = new Set<Promise<void>>();
  private slotWaiter: (() => void) | undefined;
  /** True once the window was full since the last read (see `readCount`). */
  private refilling = false;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  /** Acknowledgements of one event-loop turn go to Redis as one script call. */
  private readonly acks = new AckBatcher((ids) => {
    corkUntilNextTurn(this.deps.redis);
    return runScript<number[]>(
      this.deps.redis,
      SETTLE_ACKS,
      [this.deps.lane.stream],
      [GROUP, this.deps.consumer, ...ids],
    );
  });
  private reclaimTimer: NodeJS.Timeout | undefined;
  /** Counts and reports each settled delivery. */
  private readonly report: SettlementReport;

  constructor(
    private readonly deps: SubscriptionDeps,
    private readonly settings: SubscriptionSettings,
  ) {
    this.destination = deps.lane.destination;
    this.name = settings.subscription;
    this.handlers = new HandlerRuns({
      timeoutMs: settings.handlerTimeoutMs,
      releasesSignal: settings.releasesSignal === true,
      concurrency: settings.concurrency,
    });
    this.report = new SettlementReport(deps.counters, this, settings.onSettled, deps.logger);
  }

  /** Registers the consumer (group, heartbeat, topic subscription) and starts reading. */
  async start(): Promise<void> {
    await this.join();
    const reader = this.deps.openReader();
    this.reader = reader;
    await reader.connect();
    this.loopDone = this.loop(reader);
    const { visibilityTimeoutMs, reclaimIntervalMs } = this.deps.config;
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), Math.max(100, visibilityTimeoutMs / 3));
    this.reclaimTimer = setInterval(
      () => void this.reclaim(),
      reclaimIntervalMs ?? Math.max(250, visibilityTimeoutMs / 2),
    );
    this.deps.pump.start();
    // Entries a dead consumer left behind are taken over from the start, not after the first tick.
    void this.reclaim();
  }

  private join(): Promise<unknown> {
    const { lane, consumer } = this.deps;
    return runScript(
      this.deps.redis,
      JOIN,
      [lane.stream, lane.consumers, lane.subscriptions ?? lane.stream],
      [GROUP, consumer, lane.subscription === undefined ? "" : escapeSubscription(lane.subscription)],
    );
  }

  private async loop(reader: Redis): Promise<void> {
    const { lane, consumer, config } = this.deps;
    let recoverOwn = false;
    let backoff = 100;
    while (!this.stopped) {
      const free = readCount({
        prefetch: this.settings.prefetch,
        concurrency: this.settings.concurrency,
        unsettled: this.held.size,
        waiting: this.backlog.length,
        running: this.running,
        refilling: this.refilling,
      });
      if (free === 0) {
        if (this.held.size >= this.settings.prefetch) this.refilling = true;
        await new Promise<void>((resolve) => {
          this.slotWaiter = resolve;
        });
        continue;
      }
      try {
        if (recoverOwn) {
          // A reply lost with the connection may have assigned entries to this consumer: read them
          // back from its pending list (id 0) and hand out those not already held.
          const reply = await unlessClosed(
            reader,
            reader.xreadgroup(
              "GROUP",
              GROUP,
              consumer,
              "COUNT",
              this.settings.prefetch,
              "STREAMS",
              lane.stream,
              "0",
            ),
          );
          recoverOwn = false;
          this.accept(entriesOf(reply), true);
        } else {
          const reply = await unlessClosed(
            reader,
            reader.xreadgroup(
              "GROUP",
              GROUP,
              consumer,
              "COUNT",
              free,
              "BLOCK",
              config.blockMs,
              "STREAMS",
              lane.stream,
              ">",
            ),
          );
          this.accept(entriesOf(reply), false);
          this.refilling = false;
        }
        backoff = 100;
      } catch (error) {
        if (this.stopped) break;
        const text = errorText(error);
        if (text.includes("NOGROUP")) {
          // The stream was deleted under us: register again (an empty stream and group).
          await this.join().catch(() => undefined);
        } else {
          recoverOwn = true;
          this.deps.logger.warn("redis read failed; reading again after reconnecting", {
            destination: this.destination,
            error: text,
          });
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }

  /** Takes entries into the held set and the backlog. */
  private accept(entries: StreamEntries, redelivered: boolean): void {
    const { redis, lane } = this.deps;
    for (const [entryId, fields] of entries) {
      if (fields === null) {
        // Deleted from the stream while pending: nothing to deliver, clear it from the group.
        void redis.xack(lane.stream, GROUP, entryId).catch(() => undefined);
        continue;
      }
      if (this.held.has(entryId)) continue;
      if (this.stopped) continue;
      const raw = rawEntry(fields);
      // A hand-back copy is handed out again: counted and flagged here, as on every broker.
      const again = redelivered || raw.handedBack;
      const item: Held = { entryId, raw, redelivered: again };
      if (again) this.deps.counters.redelivered += 1;
      this.held.set(entryId, item);
      this.backlog.push(item);
    }
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.running < this.settings.concurrency && this.backlog.length > 0) {
      const item = this.backlog.shift() as Held;
      this.running += 1;
      const free = once(() => {
        this.running -= 1;
        this.pump();
        // A free handler with nothing to run is a reason to read (see `readCount`).
        this.wakeReader();
      });
      const work = this.handle(item, free).finally(() => {
        this.active.delete(work);
        free();
      });
      this.active.add(work);
    }
  }

  private async handle(item: Held, free: () => void): Promise<void> {
    const decoded = decodeEntry(item.raw, item.entryId);
    if ("error" in decoded) {
      await this.settle(item, undecodableVerdict(decoded.error), decoded.headers, true);
      return;
    }
    item.settled = { messageId: decoded.envelope.id, attempt: decoded.attempt };
    const delivery: Delivery = {
      message: decoded.envelope,
      destination: this.destination as Delivery["destination"],
      subscription: this.name,
      attempt: decoded.attempt,
      redelivered: item.redelivered,
    };
    const outcome = await this.handlers.run(this.settings.handler, delivery, undefined, free);
    const context = {
      attempt: decoded.attempt,
      policy: this.settings.policy,
      isTopic: this.deps.lane.kind === "topic",
    };
    await this.settle(item, decideSettlement(outcome, context), decoded.envelope.headers);
  }

  /** Carries out the kit's verdict with one SETTLE script; retries it while Redis is unreachable. */
  private async settle(
    item: Held,
    verdict: SettlementVerdict,
    headers: Readonly<Record<string, string>>,
    undecodable = false,
  ): Promise<void> {
    const { lane, counters } = this.deps;
    const plan = planSettlement(lane, verdict, headers);
    try {
      const result = await this.runSettle(item, plan);
      if (result === undefined) return;
      if (result !== 1 && result !== 2) {
        // Reclaimed by another consumer meanwhile (or the stream was deleted): that delivery wins.
        if (verdict.kind !== "hand-back") counters.superseded += 1;
        return;
      }
      if (verdict.kind === "retry" && verdict.delayMs > 0) this.deps.pump.wakeIn(verdict.delayMs);
      // Only a delivery a handler saw is reported; entries handed back from the backlog or from a
      // read cut short by the stop never reached the subscriber.
      if (verdict.kind !== "hand-back" || item.settled !== undefined)
        this.report.settled(verdict, item.settled ?? { messageId: undefined, attempt: 1 }, undecodable);
    } finally {
      this.held.delete(item.entryId);
      this.wakeReader();
    }
  }

  /** Lets the read loop decide again, if it waits for room in the window. */
  private wakeReader(): void {
    const waiter = this.slotWaiter;
    this.slotWaiter = undefined;
    waiter?.();
  }

  /**
   * Runs the SETTLE script, again and again while the failure is a lost connection or a timeout
   * (the script is idempotent: once it ran, the entry is no longer pending and a rerun does nothing).
   * Gives up on other errors, or two seconds into a shutdown: the entry then stays pending and is
   * reclaimed after the visibility timeout. Returns undefined when it gave up.
   */
  private async runSettle(item: Held, plan: SettlePlan): Promise<number | undefined> {
    const { redis, lane, consumer } = this.deps;
    let backoff = 100;
    let giveUpAt = Number.POSITIVE_INFINITY;
    for (;;) {
      try {
        if (plan.mode === "ack") return await this.acks.ack(item.entryId);
        return await runScript<number>(
          redis,
          SETTLE,
          [lane.stream, plan.target],
          [
            GROUP,
            consumer,
            item.entryId,
            plan.mode,
            plan.headersJson,
            item.raw.bodyJson,
            plan.delayMs,
            nonce(),
          ],
        );
      } catch (error) {
        const classified = classifyRedisError(error, `settle a delivery of "${this.destination}"`);
        const retryable = classified instanceof ProviderError && classified.retryable;
        if (this.stopped && giveUpAt === Number.POSITIVE_INFINITY) giveUpAt = Date.now() + SHUTDOWN_STEP_MS;
        if (!retryable || Date.now() > giveUpAt) {
          this.deps.logger.warn("redis could not settle a delivery; it stays pending and will be reclaimed", {
            destination: this.destination,
            error: classified.message,
          });
          return undefined;
        }
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 2_000);
      }
    }
  }

  /** Refreshes this consumer's heartbeat and the idle time of every entry it holds. */
  private async heartbeat(): Promise<void> {
    const { redis, lane, consumer } = this.deps;
    try {
      await runScript(redis, TOUCH, [lane.stream, lane.consumers], [GROUP, consumer, ...this.held.keys()]);
    } catch (error) {
      this.deps.logger.debug("redis heartbeat failed", {
        destination: this.destination,
        error: errorText(error),
      });
    }
  }

  /**
   * Takes over the entries of consumers known to be dead, then entries idle past the visibility
   * timeout, and forgets consumers that went silent.
   */
  async reclaim(): Promise<void> {
    if (this.stopped) return;
    const { redis, lane, consumer, config } = this.deps;
    try {
      const dead = this.deps.deadConsumers();
      if (dead.length > 0 && this.settings.prefetch > this.held.size) {
        const claimed = await runScript<StreamEntries>(
          redis,
          CLAIM_DEAD,
          [lane.stream],
          [GROUP, consumer, this.settings.prefetch - this.held.size, ...dead],
        );
        this.accept(claimed, true);
      }
      const free = this.settings.prefetch - this.held.size;
      if (free > 0) {
        const reply = (await redis.xautoclaim(
          lane.stream,
          GROUP,
          consumer,
          config.visibilityTimeoutMs,
          "0-0",
          "COUNT",
          free,
        )) as [string, StreamEntries, string[]?];
        this.accept(reply[1] ?? [], true);
      }
      await runScript(
        redis,
        REAP,
        [lane.stream, lane.consumers],
        [GROUP, config.visibilityTimeoutMs, consumer],
      );
    } catch (error) {
      const text = errorText(error);
      if (!text.includes("NOGROUP")) {
        this.deps.logger.debug("redis reclaim pass failed", { destination: this.destination, error: text });
      }
    }
  }

  unsubscribe(): Promise<void> {
    this.stopping ??= this.stop();
    return this.stopping;
  }

  /**
   * Stops reading, aborts running handlers and hands every held entry back (a copy at the tail of
   * the stream, written with the XACK of the original), then leaves the group. Bounded: a Redis that
   * does not answer cannot hold it for long; what could not be handed back is reclaimed later.
   */
  private async stop(): Promise<void> {
    this.stopped = true;
    this.deps.onStop(this);
    clearInterval(this.heartbeatTimer);
    clearInterval(this.reclaimTimer);
    this.deps.pump.stop();
    this.reader?.disconnect();
    this.wakeReader();
    this.handlers.abortAll(new Error("subscription closed"));
    const waiting = this.backlog.splice(0);
    const handBacks = waiting.map((item) => this.handBack(item));
    await settleWithin(
      Promise.allSettled([...this.active, ...handBacks, this.loopDone]),
      SHUTDOWN_STEP_MS * 2,
    );
    await settleWithin(this.handBackStray(), SHUTDOWN_STEP_MS);
    const { redis, lane, consumer } = this.deps;
    await settleWithin(
      runScript(redis, LEAVE, [lane.stream, lane.consumers], [GROUP, consumer]),
      SHUTDOWN_STEP_MS,
    );
  }

  private handBack(item: Held): Promise<void> {
    const decoded = decodeEntry(item.raw, item.entryId);
    const headers = "error" in decoded ? decoded.headers : decoded.envelope.headers;
    return this.settle(item, { kind: "hand-back" }, headers);
  }

  /** Hands back entries assigned to this consumer whose reply never arrived (read cut short by the stop). */
  private async handBackStray(): Promise<void> {
    const { redis, lane, consumer } = this.deps;
    const reply = await redis.xreadgroup(
      "GROUP",
      GROUP,
      consumer,
      "COUNT",
      1_000,
      "STREAMS",
      lane.stream,
      "0",
    );
    const stray: Promise<void>[] = [];
    for (const [entryId, fields] of entriesOf(reply)) {
      if (fields === null || this.held.has(entryId)) continue;
      const item: Held = { entryId, raw: rawEntry(fields), redelivered: true };
      this.held.set(entryId, item);
      stray.push(this.handBack(item));
    }
    await Promise.allSettled(stray);
  }
}

/** How one verdict becomes one SETTLE call. */
interface SettlePlan {
  readonly mode: "ack" | "add" | "back" | "delay";
  readonly target: string;
  readonly headersJson: string;
  readonly delayMs: number;
}

function planSettlement(
  lane: LaneKeys,
  verdict: SettlementVerdict,
  headers: Readonly<Record<string, string>>,
): SettlePlan {
  switch (verdict.kind) {
    case "ack":
      return { mode: "ack", target: lane.stream, headersJson: "", delayMs: 0 };
    case "hand-back":
      return { mode: "back", target: lane.stream, headersJson: JSON.stringify(headers), delayMs: 0 };
    case "retry": {
      const headersJson = JSON.stringify(retryHeaders(headers, verdict.nextAttempt, verdict.lastError));
      return verdict.delayMs > 0
        ? { mode: "delay", target: lane.delayed, headersJson, delayMs: verdict.delayMs }
        : { mode: "add", target: lane.stream, headersJson, delayMs: 0 };
    }
    case "dead":
      return {
        mode: "add",
        target: lane.dlq,
        headersJson: JSON.stringify(
          deadLetterHeaders(headers, verdict.reason as DeadLetterReason, originOf(lane), verdict.lastError),
        ),
        delayMs: 0,
      };
  }
}

/** Where a dead letter of this lane came from. */
export function originOf(lane: LaneKeys): DeadLetterOrigin {
  return lane.subscription === undefined
    ? { destination: lane.destination }
    : { destination: lane.destination, subscription: lane.subscription };
}

/**
 * `read`, or a rejection as soon as the reader's connection closes. The reader does not resend
 * commands cut off by a lost connection (`autoResendUnfulfilledCommands: false`), and ioredis then
 * drops them on reconnect without settling their promises: without this, a blocking read in flight
 * at the moment of a cut would never return and the subscription would stop reading for good.
 */
function unlessClosed<T>(reader: Redis, read: Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onClose = () => reject(new Error("the reader connection closed during a read"));
    reader.once("close", onClose);
    read.then(
      (value) => {
        reader.off("close", onClose);
        resolve(value);
      },
      (error: unknown) => {
        reader.off("close", onClose);
        reject(error);
      },
    );
  });
}

/** The entries of the one stream an XREADGROUP reply covers. */
function entriesOf(reply: unknown): StreamEntries {
  if (!Array.isArray(reply) || reply.length === 0) return [];
  const first = reply[0] as [string, StreamEntries] | undefined;
  return first?.[1] ?? [];
}

let nonceCounter = 0;
/** Makes each delayed-set member unique, so two identical copies scheduled at once are both kept. */
export function nonce(): string {
  nonceCounter = (nonceCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${process.pid.toString(36)}.${Date.now().toString(36)}.${nonceCounter.toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
}
