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
  deadLetterHeaders,
  decideSettlement,
  HandlerRuns,
  once,
  pauseAfterCopyFailure,
  retryHeaders,
  SettlementReport,
  type SettlementVerdict,
  settleWithin,
  undecodableVerdict,
} from "@factflow/provider-kit";
import { copyPayload, decodeMessage } from "./codec.js";
import type { PulsarConfig } from "./config.js";
import type { PulsarRoute } from "./naming.js";
import type { Producers } from "./producers.js";
import type { Topics } from "./topics.js";
import type { ConsumerLink, IncomingMessage, PulsarSubscriptionType, PulsarTransport } from "./transport.js";

/** Longest the settling copies may hold up an unsubscribe. */
const SHUTDOWN_STEP_MS = 2_000;

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: PulsarConfig;
  readonly transport: PulsarTransport;
  readonly producers: Producers;
  readonly topics: Topics;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  readonly onStop: (subscription: PulsarSubscription) => void;
}

/** Settings fixed at subscribe time. */
export interface SubscriptionSettings {
  readonly route: PulsarRoute;
  readonly handler: MessageHandler;
  readonly prefetch: number;
  readonly concurrency: number;
  readonly policy: RetryPolicy;
  readonly handlerTimeoutMs: number;
  /** The subscriber lets go of its signal once it settles (see the kit's `SignalPool`). */
  readonly releasesSignal?: boolean;
  /** The subscriber's `onSettled`. */
  readonly onSettled?: SettlementListener | undefined;
  /**
   * `Shared` (competing consumers, any order), or `Failover` for ordered routes (`ordering: "fifo"`,
   * with or without a group key): one consumer across every process sees the whole topic in publish
   * order and the kit's group lanes keep each group in order (see `ordered-plan.ts`).
   */
  readonly subscriptionType: PulsarSubscriptionType;
}

interface Pending {
  readonly message: IncomingMessage;
  readonly link: ConsumerLink;
  readonly source: Source;
  /** Who the verdict is reported for, once the message is decoded. */
  settled?: { readonly messageId: string | undefined; readonly attempt: number };
}

/**
 * One topic + Pulsar subscription the subscription consumes: the destination's own, and for a topic
 * subscription also its retry topic. Reconnects with backoff whenever its link drops.
 */
class Source {
  link: ConsumerLink | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly owner: PulsarSubscription,
    readonly topic: string,
    readonly pulsarSubscription: string,
  ) {}

  async attach(): Promise<void> {
    const { deps, settings } = this.owner;
    const link = await deps.transport.openConsumer(this.topic, this.pulsarSubscription, {
      subscriptionType: settings.subscriptionType,
      receiverQueueSize: settings.prefetch,
      negativeAckRedeliveryDelayMs: deps.config.negativeAckRedeliveryDelayMs,
    });
    if (this.owner.stopped) {
      link.close();
      return;
    }
    this.link = link;
    link.onMessage((message) => this.owner.received({ message, link, source: this }));
    link.onClose((cause) => {
      if (this.link !== link) return;
      this.link = undefined;
      this.owner.detached(link);
      if (this.owner.stopped || cause.kind === "local") return;
      deps.logger.warn("pulsar consumer connection lost; resubscribing", {
        destination: this.owner.destination,
        topic: this.topic,
      });
      this.scheduleReattach(deps.config.reconnectInitialDelayMs);
    });
    link.permit(settings.prefetch);
  }

  scheduleReattach(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.owner.stopped || this.link !== undefined) return;
      this.attach().catch((error: unknown) => {
        this.owner.deps.logger.warn("pulsar resubscribe failed; retrying", {
          destination: this.owner.destination,
          error: error instanceof Error ? error.message : String(error),
        });
        this.scheduleReattach(Math.min(delayMs * 2, this.owner.deps.config.reconnectMaxDelayMs));
      });
    }, delayMs);
  }

  stop(): void {
    clearTimeout(this.timer);
    this.link?.close();
    this.link = undefined;
  }
}

/**
 * A consumer of one queue (the shared subscription `factflow` of its topic) or of one topic
 * subscription. Holds at most `prefetch` deliveries ahead (the broker's WebSocket handler sends at
 * most `receiverQueueSize` unsettled messages), runs at most `concurrency` handlers, and settles each by the handler's return:
 * ack, a retry copy (published with `deliverAfterMs`, confirmed, then the original acked), a
 * dead-letter copy (confirmed, then acked). A settlement for a link that has since dropped is
 * withheld and counted as `superseded`: the broker has already handed that delivery out again.
 */
export class PulsarSubscription implements Subscription {
  readonly destination: string;
  readonly name: string;
  stopped = false;
  private readonly sources: Source[];
  private backlog: Pending[] = [];
  private running = 0;
  /** Running handlers, whose timeouts share one timer. */
  private readonly handlers: HandlerRuns;
  private readonly settling = new Set<Promise<void>>();
  /** Counts and reports each settled delivery. */
  private readonly report: SettlementReport;

  constructor(
    readonly deps: SubscriptionDeps,
    readonly settings: SubscriptionSettings,
  ) {
    const { route } = settings;
    this.destination = route.destination;
    this.name = route.subscription;
    this.report = new SettlementReport(deps.counters, this, settings.onSettled, deps.logger);
    this.handlers = new HandlerRuns({
      timeoutMs: settings.handlerTimeoutMs,
      releasesSignal: settings.releasesSignal === true,
      concurrency: settings.concurrency,
    });
    this.sources = [new Source(this, route.topic, route.pulsarSubscription)];
    if (route.retryTopic !== route.topic)
      this.sources.push(new Source(this, route.retryTopic, route.pulsarSubscription));
  }

  get route(): PulsarRoute {
    return this.settings.route;
  }

  /** Deliveries received and not settled yet (running or waiting for a handler). */
  inFlight(): number {
    return this.running + this.backlog.length;
  }

  /** Opens every source; resolves once the broker registered each consumer. */
  async attach(): Promise<void> {
    await Promise.all(this.sources.map((source) => source.attach()));
  }

  /** Connections of this subscription currently open. */
  openLinks(): number {
    return this.sources.filter((s) => s.link !== undefined && !s.link.closed).length;
  }

  received(pending: Pending): void {
    if (this.stopped || pending.link.closed) return;
    if (pending.message.redeliveryCount > 0) this.deps.counters.redelivered += 1;
    this.backlog.push(pending);
    this.pump();
  }

  /** A link dropped: its deliveries go back to the broker, so our copies of them are dropped unhandled. */
  detached(link: ConsumerLink): void {
    this.backlog = this.backlog.filter((p) => p.link !== link);
  }

  private pump(): void {
    while (!this.stopped && this.running < this.settings.concurrency && this.backlog.length > 0) {
      const next = this.backlog.shift() as Pending;
      this.running += 1;
      const free = once(() => {
        this.running -= 1;
        this.pump();
      });
      void this.handle(next, free).finally(free);
    }
  }

  private async handle(pending: Pending, free: () => void): Promise<void> {
    const decoded = decodeMessage(pending.message.payload, pending.message.publishTime);
    if ("error" in decoded) {
      await this.settle(pending, undecodableVerdict(decoded.error), undefined);
      return;
    }
    pending.settled = { messageId: decoded.envelope.id, attempt: decoded.attempt };
    const delivery: Delivery = {
      message: decoded.envelope,
      destination: this.destination as Delivery["destination"],
      subscription: this.name,
      attempt: decoded.attempt,
      redelivered: pending.message.redeliveryCount > 0,
    };
    const outcome = await this.handlers.run(this.settings.handler, delivery, undefined, free);
    const verdict = decideSettlement(outcome, {
      attempt: decoded.attempt,
      policy: this.settings.policy,
      isTopic: this.route.kind === "topic",
    });
    await this.settle(pending, verdict, decoded);
  }

  private isCurrent(pending: Pending): boolean {
    return !pending.link.closed && pending.source.link === pending.link;
  }

  private async settle(
    pending: Pending,
    verdict: SettlementVerdict,
    decoded: { headers: Record<string, string>; body: import("@factflow/protocols").JsonValue } | undefined,
  ): Promise<void> {
    if (verdict.kind === "hand-back") {
      // The link closes with the subscription; the broker redelivers.
      this.reported(pending, verdict);
      return;
    }
    if (!this.isCurrent(pending)) {
      this.deps.counters.superseded += 1;
      return;
    }
    if (verdict.kind === "ack") {
      pending.link.ack(pending.message.messageId);
      pending.link.permit(1);
      this.reported(pending, verdict);
      return;
    }
    const work = this.forward(pending, verdict, decoded);
    this.settling.add(work);
    try {
      await work;
    } finally {
      this.settling.delete(work);
    }
  }

  /** Retry or dead letter: publish the copy, and ack the original only once the broker confirmed it. */
  private async forward(
    pending: Pending,
    verdict: Extract<SettlementVerdict, { kind: "retry" | "dead" }>,
    decoded: { headers: Record<string, string>; body: import("@factflow/protocols").JsonValue } | undefined,
  ): Promise<void> {
    const { route } = this;
    const { producers, topics, counters } = this.deps;
    try {
      if (verdict.kind === "retry" && decoded !== undefined) {
        const payload = copyPayload(decoded.headers, decoded.body, (h) =>
          retryHeaders(h, verdict.nextAttempt, verdict.lastError),
        );
        await producers.send(route.retryTopic, { payload, deliverAfterMs: verdict.delayMs });
      } else {
        const origin =
          route.kind === "topic"
            ? { destination: route.destination, subscription: route.subscription }
            : { destination: route.destination };
        const reason = verdict.kind === "dead" ? verdict.reason : "incomplete";
        const payload =
          decoded === undefined
            ? pending.message.payload
            : copyPayload(decoded.headers, decoded.body, (h) =>
                deadLetterHeaders(h, reason, origin, verdict.lastError),
              );
        await topics.ensureDeadLetterTopic(route.deadLetterTopic);
        await producers.send(route.deadLetterTopic, { payload });
      }
    } catch (error) {
      // No confirmed copy: keep the original. The broker hands it out again after its fixed
      // negative-ack delay; the pause first keeps a persistent failure from looping hot.
      this.deps.logger.warn(
        "pulsar could not publish the retry/dead-letter copy; handing the original back",
        {
          destination: this.destination,
          error: error instanceof Error ? error.message : String(error),
        },
      );
      await pauseAfterCopyFailure();
      if (this.isCurrent(pending)) {
        pending.link.nack(pending.message.messageId);
        pending.link.permit(1);
      }
      return;
    }
    // The link dropped meanwhile: the copy exists and the broker also redelivers the original — a
    // duplicate, never a loss.
    if (!this.isCurrent(pending)) {
      counters.superseded += 1;
      return;
    }
    pending.link.ack(pending.message.messageId);
    pending.link.permit(1);
    this.reported(pending, verdict);
  }

  /** Counts and reports a verdict carried out; an undecodable message has no `settled` identity. */
  private reported(pending: Pending, verdict: SettlementVerdict): void {
    const identity = pending.settled ?? { messageId: undefined, attempt: 1 };
    this.report.settled(verdict, identity, pending.settled === undefined);
  }

  unsubscribe(): Promise<void> {
    return this.stop();
  }

  /** Aborts running handlers, lets copies being confirmed finish (bounded), and closes the links. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.deps.onStop(this);
    this.handlers.abortAll(new Error("subscription closed"));
    // Handlers that returned wait for their settleAfter (a lineage commit): settle those deliveries
    // rather than hand back messages whose work is done.
    await settleWithin(this.handlers.drain(), SHUTDOWN_STEP_MS);
    await settleWithin(Promise.allSettled([...this.settling]), SHUTDOWN_STEP_MS);
    this.backlog = [];
    for (const source of this.sources) source.stop();
  }
}
