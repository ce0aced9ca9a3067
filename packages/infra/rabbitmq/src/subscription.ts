import type {
  Delivery,
  DurabilityCounters,
  Logger,
  MessageHandler,
  RetryPolicy,
  SettlementListener,
  Subscription,
} from "@factflow/protocols";
import {
  decideSettlement,
  HandlerRuns,
  once,
  pauseAfterCopyFailure,
  SettlementReport,
  type SettlementVerdict,
  settleWithin,
  undecodableVerdict,
} from "@factflow/provider-kit";
import type { Channel, ConsumeMessage } from "amqplib";
import { classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager, LiveConnection } from "./connection-manager.js";
import { decodeMessage } from "./envelope-codec.js";
import { type FailureRoute, publishDeadLetter, publishRetry } from "./failure-router.js";
import { handBackAndClose } from "./hand-back.js";
import type { Publisher } from "./publisher.js";

/** Longest one shutdown step (cancel, settling copies, channel close) may wait on the broker. */
const SHUTDOWN_STEP_MS = 2_000;

/** A consumer channel. Settlements are only sent on the attachment a delivery arrived on. */
interface Attachment {
  readonly channel: Channel;
  readonly generation: number;
  consumerTag: string | undefined;
  closed: boolean;
}

interface Pending {
  readonly message: ConsumeMessage;
  readonly attachment: Attachment;
  /** Who the verdict is reported for, once the message is decoded. */
  settled?: { readonly messageId: string | undefined; readonly attempt: number };
}

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: RabbitMqConfig;
  readonly connection: ConnectionManager;
  readonly publisher: Publisher;
  readonly topology: import("./topology.js").Topology;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  /** Re-declares the subscription's queues; `fresh` skips what the topology cache remembers. */
  readonly declare: (fresh?: boolean) => Promise<void>;
  readonly onStop: (subscription: RabbitSubscription) => void;
}

/** Settings fixed at subscribe time. */
export interface SubscriptionSettings {
  readonly route: FailureRoute;
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
 * One consumer on one AMQP queue, on its own channel. Runs at most `concurrency` handlers, keeps the
 * rest of the prefetched deliveries in arrival order, and settles each by the handler's return:
 * ack, retry copy (confirmed, then ack), dead-letter copy (confirmed, then ack) or nack-requeue for
 * an incomplete handler. A settlement meant for a channel that has since closed is withheld and
 * counted as `superseded`: the broker has already put that delivery back.
 */
export class RabbitSubscription implements Subscription {
  readonly destination: string;
  readonly name: string;
  private attachment: Attachment | undefined;
  private backlog: Pending[] = [];
  private running = 0;
  private stopped = false;
  /** Running handlers, whose timeouts share one timer. */
  private readonly handlers: HandlerRuns;
  private readonly settling = new Set<Promise<void>>();
  private retryTimer: NodeJS.Timeout | undefined;
  /** Counts and reports each settled delivery. */
  private readonly report: SettlementReport;

  constructor(
    private readonly deps: SubscriptionDeps,
    private readonly settings: SubscriptionSettings,
  ) {
    this.destination = settings.route.destination;
    this.handlers = new HandlerRuns({
      timeoutMs: settings.handlerTimeoutMs,
      releasesSignal: settings.releasesSignal === true,
      concurrency: settings.concurrency,
    });
    this.name = settings.route.subscription;
    this.report = new SettlementReport(deps.counters, this, settings.onSettled, deps.logger);
  }

  get route(): FailureRoute {
    return this.settings.route;
  }

  /** Deliveries received and not settled yet (running or waiting for a handler slot). */
  inFlight(): number {
    return this.running + this.backlog.length;
  }

  /** Opens a channel on `live` and starts consuming; resolves once the broker registered the consumer. */
  async attach(live: LiveConnection): Promise<void> {
    if (this.stopped) return;
    const channel = await live.model.createChannel();
    const attachment: Attachment = {
      channel,
      generation: live.generation,
      consumerTag: undefined,
      closed: false,
    };
    channel.on("error", (error: Error) => {
      this.deps.logger.warn("rabbitmq consumer channel error", {
        destination: this.destination,
        error: classifyAmqpError(error, "consumer channel", this.deps.config.url).message,
      });
    });
    channel.on("close", () => this.detached(attachment));
    this.attachment = attachment;
    await channel.prefetch(this.settings.prefetch);
    const ok = await channel.consume(
      this.settings.route.sourceQueue,
      (message) => {
        if (message === null) {
          // The broker cancelled the consumer (queue deleted): re-declare and consume again.
          void channel.close().catch(() => {});
          return;
        }
        this.received(message, attachment);
      },
      { noAck: false },
    );
    attachment.consumerTag = ok.consumerTag;
  }

  private detached(attachment: Attachment): void {
    attachment.closed = true;
    // Deliveries of a closed channel are back in the queue; drop our copies unhandled.
    this.backlog = this.backlog.filter((p) => p.attachment !== attachment);
    if (this.attachment !== attachment) return;
    this.attachment = undefined;
    if (this.stopped) return;
    const live = this.deps.connection.current();
    // On a lost connection the provider re-attaches every subscription after reconnecting.
    if (live === undefined || live.generation !== attachment.generation) return;
    this.scheduleReattach(live);
  }

  /** Re-declares and re-attaches after a short backoff, retrying until it works or the connection changes. */
  scheduleReattach(live: LiveConnection, delayMs = 200): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => {
      if (this.stopped || this.attachment !== undefined || this.deps.connection.current() !== live) return;
      // Something closed the consumer channel (often: the queue was deleted), so declare for real.
      this.deps
        .declare(true)
        .then(() => this.attach(live))
        .catch((error: unknown) => {
          this.deps.logger.warn("rabbitmq re-subscribe failed; retrying", {
            destination: this.destination,
            error: error instanceof Error ? error.message : String(error),
          });
          if (this.attachment?.closed !== false) this.attachment = undefined;
          this.scheduleReattach(live, Math.min(delayMs * 2, this.deps.config.reconnectMaxDelayMs));
        });
    }, delayMs);
  }

  private received(message: ConsumeMessage, attachment: Attachment): void {
    if (this.stopped || attachment.closed) return;
    if (message.fields.redelivered) this.deps.counters.redelivered += 1;
    this.backlog.push({ message, attachment });
    this.pump();
  }

  private pump(): void {
    while (!this.stopped && this.running < this.settings.concurrency && this.backlog.length > 0) {
      const next = this.backlog.shift()!;
      this.running += 1;
      const free = once(() => {
        this.running -= 1;
        this.pump();
      });
      void this.handle(next, free).finally(free);
    }
  }

  private async handle(pending: Pending, free: () => void): Promise<void> {
    const { message } = pending;
    const decoded = decodeMessage(message);
    const isTopic = this.settings.route.kind === "topic";
    if ("error" in decoded) {
      pending.settled = { messageId: undefined, attempt: 1 };
      await this.settle(pending, undecodableVerdict(decoded.error), true);
      return;
    }
    pending.settled = { messageId: decoded.envelope.id, attempt: decoded.attempt };
    const delivery: Delivery = {
      message: decoded.envelope,
      destination: this.destination as Delivery["destination"],
      subscription: this.name,
      attempt: decoded.attempt,
      redelivered: message.fields.redelivered,
    };
    // Bounded whatever the handler does: a timeout settles at once, even if it never returns.
    const outcome = await this.handlers.run(this.settings.handler, delivery, undefined, free);
    const context = { attempt: decoded.attempt, policy: this.settings.policy, isTopic };
    await this.settle(pending, decideSettlement(outcome, context));
  }

  private isCurrent(pending: Pending): boolean {
    return !pending.attachment.closed && this.attachment === pending.attachment;
  }

  /** Carries out the kit's verdict on the delivery's own channel. */
  private async settle(pending: Pending, verdict: SettlementVerdict, undecodable = false): Promise<void> {
    if (!this.isCurrent(pending)) {
      if (verdict.kind !== "hand-back") this.deps.counters.superseded += 1;
      return;
    }
    if (verdict.kind === "ack" || verdict.kind === "hand-back") {
      if (this.send(pending, verdict.kind === "ack" ? "ack" : "requeue")) this.reported(pending, verdict);
      return;
    }
    const work = this.forward(pending, verdict, undecodable);
    this.settling.add(work);
    try {
      await work;
    } finally {
      this.settling.delete(work);
    }
  }

  /** Retry or dead letter: publish the copy, and ack the original only once the copy is confirmed. */
  private async forward(
    pending: Pending,
    verdict: Extract<SettlementVerdict, { kind: "retry" | "dead" }>,
    undecodable: boolean,
  ): Promise<void> {
    const { route } = this.settings;
    const { publisher, topology, counters } = this.deps;
    try {
      if (verdict.kind === "retry") {
        await publishRetry(publisher, topology, route, pending.message, verdict);
      } else {
        await publishDeadLetter(
          publisher,
          topology,
          route,
          pending.message,
          verdict.reason,
          verdict.lastError,
        );
      }
    } catch (error) {
      // No confirmed copy: keep the original, the broker hands it out again.
      this.deps.logger.warn(
        "rabbitmq could not publish the retry/dead-letter copy; requeueing the original",
        {
          destination: this.destination,
          error: error instanceof Error ? error.message : String(error),
        },
      );
      await pauseAfterCopyFailure();
      if (this.isCurrent(pending)) this.send(pending, "requeue");
      return;
    }
    // If the channel died meanwhile, the copy exists and the broker also redelivers the original:
    // a duplicate, never a loss.
    if (!this.isCurrent(pending)) {
      counters.superseded += 1;
      return;
    }
    if (this.send(pending, "ack")) this.reported(pending, verdict, undecodable);
  }

  private reported(pending: Pending, verdict: SettlementVerdict, undecodable = false): void {
    this.report.settled(verdict, pending.settled ?? { messageId: undefined, attempt: 1 }, undecodable);
  }

  /**
   * Sends an ack or a nack-requeue on the delivery's own channel. A channel that closed under us
   * (the close event may not have arrived yet) throws; the settlement is then withheld, the broker
   * having already put the delivery back.
   */
  private send(pending: Pending, kind: "ack" | "requeue"): boolean {
    try {
      if (kind === "ack") pending.attachment.channel.ack(pending.message);
      else pending.attachment.channel.nack(pending.message, false, true);
      return true;
    } catch {
      pending.attachment.closed = true;
      if (kind === "ack") this.deps.counters.superseded += 1;
      return false;
    }
  }

  /** Stops consuming: aborts handlers, waits for copies being confirmed, closes the channel (requeueing the rest). */
  unsubscribe(): Promise<void> {
    return this.stop(false);
  }

  /**
   * Stops the subscription. With `connectionClosing` the provider is about to close the whole
   * connection, which cancels the consumer and requeues unacked deliveries by itself, so the
   * per-channel round trips (each one a wait on a possibly stalled broker) are skipped.
   */
  async stop(connectionClosing: boolean): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.deps.onStop(this);
    const attachment = this.attachment;
    const open = attachment !== undefined && !attachment.closed;
    // Cancel first, so the broker stops handing out deliveries while handlers wind down.
    if (!connectionClosing && open && attachment.consumerTag !== undefined) {
      await settleWithin(attachment.channel.cancel(attachment.consumerTag), SHUTDOWN_STEP_MS);
    }
    this.handlers.abortAll(new Error("subscription closed"));
    // Copies being confirmed get a moment to finish, so their originals are acked rather than
    // redelivered as duplicates; a stalled broker cannot hold the shutdown hostage.
    await settleWithin(Promise.allSettled([...this.settling]), SHUTDOWN_STEP_MS);
    this.backlog = [];
    this.attachment = undefined;
    if (!connectionClosing && open) {
      await settleWithin(
        handBackAndClose(attachment.channel, this.settings.route.sourceQueue),
        SHUTDOWN_STEP_MS,
      );
    }
  }
}
