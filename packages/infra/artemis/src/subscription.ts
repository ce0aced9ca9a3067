import {
  type DeadLetterReason,
  type Delivery,
  type DurabilityCounters,
  type Logger,
  type MessageHandler,
  ProviderError,
  type RetryPolicy,
  type SettlementListener,
  type Subscription,
} from "@factflow/protocols";
import {
  COPY_FAILURE_PAUSE_MS,
  deadLetterHeaders,
  decideSettlement,
  type GroupKeySpec,
  groupKeyOf,
  HandlerRuns,
  once,
  retryHeaders,
  SettlementReport,
  type SettlementVerdict,
  settleWithin,
  undecodableVerdict,
} from "@factflow/provider-kit";
import type { IMessage } from "@stomp/stompjs";
import { type DecodedMessage, DLQ_ID_HEADER, decodeMessage } from "./envelope-codec.js";
import {
  type ArtemisTarget,
  consumedQueueName,
  deadLetterQueueName,
  subscribeDestination,
} from "./naming.js";
import type { DeliveryTicket, SettlementGuard } from "./settlement-guard.js";
import type { LinkSubscription, StompLink } from "./stomp-link.js";
import { assertIsoTimestampHeader, isoTimestamp, SUBSCRIBED_AT_HEADER } from "./timestamp.js";

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly link: StompLink;
  readonly guard: SettlementGuard;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  /** SENDs a copy with a receipt (retry, dead letter, incomplete redelivery). */
  readonly sendCopy: (
    destination: string,
    routing: "ANYCAST" | "MULTICAST",
    headers: Record<string, string>,
    body: string,
    delayMs: number,
    what: string,
  ) => Promise<void>;
  readonly windowBytes: number;
  /** Where a message's FIFO group comes from: one message per group at a time, in order. */
  readonly groupKey?: GroupKeySpec;
  readonly retry: RetryPolicy;
  readonly concurrency: number;
  readonly handlerTimeoutMs: number;
  /** The subscriber lets go of its signal once it settles (see the kit's `SignalPool`). */
  readonly releasesSignal?: boolean;
  /** The subscriber's `onSettled`. */
  readonly onSettled?: SettlementListener | undefined;
  readonly onClosed: (subscription: ArtemisSubscription) => void;
  /** Runs after a settlement copy has its RECEIPT and before the original is acknowledged. */
  readonly afterCopyConfirmed?: (info: {
    readonly destination: string;
    readonly what: string;
  }) => void | Promise<void>;
}

interface Pending {
  readonly message: IMessage;
  readonly decoded: DecodedMessage;
  readonly ticket: DeliveryTicket;
  readonly subscriptionId: string;
  /** FIFO group, when the subscription has `groupBy`. */
  readonly group: string | undefined;
  /** Not a Factflow message: dead-lettered before any handler saw it. */
  readonly undecodable?: boolean;
}

/**
 * SUBSCRIBE headers of a subscription's consumer. `x-factflow-subscribed-at` records when this
 * consumer (attachment) was created, in strict ISO-8601 with `Z`: see `timestamp.ts` for why.
 */
export function subscribeHeaders(
  kind: "queue" | "topic",
  windowBytes: number,
  now: Date = new Date(),
): Record<string, string> {
  const subscribedAt = isoTimestamp(now);
  assertIsoTimestampHeader(SUBSCRIBED_AT_HEADER, subscribedAt);
  return {
    ack: "client-individual",
    "subscription-type": kind === "queue" ? "ANYCAST" : "MULTICAST",
    "consumer-window-size": String(windowBytes),
    [SUBSCRIBED_AT_HEADER]: subscribedAt,
  };
}

/** How many times a settlement copy (retry or dead letter) is re-sent while the delivery stays valid. */
const COPY_ATTEMPTS = 3;
/** Longest `unsubscribe` waits for settlements in flight (copy + RECEIPT + ACK) before it lets go. */
const UNSUBSCRIBE_SETTLE_MS = 5_000;

/**
 * One Factflow subscription: a STOMP consumer (`ack: client-individual`) re-created on every new
 * connection, a local queue of deliveries waiting for a handler slot, and handler-return settlement.
 */
export class ArtemisSubscription implements Subscription {
  readonly destination: string;
  private attachment = 0;
  private current: LinkSubscription | undefined;
  private readonly waiting: Pending[] = [];
  /** Deliveries in a handler or settling: they hold the subscription's handler slots. */
  private running = 0;
  /** Running handlers, whose timeouts share one timer. */
  private readonly handlers: HandlerRuns;
  /** Groups with a delivery in a handler (or settling) right now. */
  private readonly busyGroups = new Set<string>();
  private stopped = false;
  /** Set once the broker consumer is gone: no settlement may act for it any more. */
  private detached = false;
  /** Settlements in flight (copy, RECEIPT, ACK), awaited by `unsubscribe`. */
  private readonly settling = new Set<Promise<void>>();
  private restartTimer: NodeJS.Timeout | undefined;
  /** Counts and reports each settled delivery. */
  private readonly report: SettlementReport;

  constructor(
    readonly target: ArtemisTarget,
    readonly name: string,
    private readonly handler: MessageHandler,
    private readonly deps: SubscriptionDeps,
  ) {
    this.destination = target.destination;
    this.handlers = new HandlerRuns({
      timeoutMs: deps.handlerTimeoutMs,
      releasesSignal: deps.releasesSignal === true,
      concurrency: deps.concurrency,
    });
    this.report = new SettlementReport(
      deps.counters,
      { destination: this.destination, name },
      deps.onSettled,
      deps.logger,
    );
  }

  /** The Artemis queue this subscription consumes. */
  get queueName(): string {
    return consumedQueueName(this.target, this.name);
  }

  /** Deliveries received but not yet handed to a handler. */
  get buffered(): number {
    return this.waiting.length;
  }

  /**
   * SUBSCRIBEs on the current connection (on subscribe, after every reconnect, and on restart).
   * Deliveries still waiting for a handler belong to the old consumer: the broker reissues them.
   */
  async attach(confirm = true): Promise<void> {
    if (this.stopped) return;
    this.attachment += 1;
    const attachment = this.attachment;
    for (const dropped of this.waiting.splice(0)) this.deps.guard.release(dropped.ticket);
    // Handlers of the old consumer cannot settle any more (the broker reissues their deliveries).
    // They run to their end (their timeout bounds them) and whatever they return is withheld by the
    // settlement guard, counted as superseded.
    const subscription = await this.deps.link.subscribe(
      subscribeDestination(this.target, this.name),
      subscribeHeaders(this.target.kind, this.deps.windowBytes),
      (message, generation) => this.receive(message, generation, attachment),
      confirm,
    );
    if (this.stopped) {
      await subscription.unsubscribe();
    } else if (attachment === this.attachment) {
      this.current = subscription;
    } else {
      // A later attach overlapped this one and won: this consumer's deliveries are never handled
      // (receive() ignores them), so it must go, or the broker would hold them for it for ever.
      await subscription.unsubscribe().catch((error: unknown) =>
        this.deps.logger.debug("artemis: superseded consumer could not unsubscribe", {
          destination: this.destination,
          error: error instanceof Error ? error.message : String(error),
        }),
      );
    }
  }

  /**
   * Replaces the broker consumer on the same connection (a route restart). Deliveries the old
   * consumer handed out are reissued by the broker to the new one; their handlers' settlements are
   * withheld and counted as superseded.
   */
  async restart(): Promise<void> {
    const old = this.current;
    try {
      await this.attach();
    } catch (error) {
      // The new consumer was not confirmed (e.g. a stalled link): the old one still holds its
      // deliveries, but they are no longer handled. Try again shortly; a reconnect also re-attaches.
      this.settlementFailed(error);
      throw error;
    }
    await old?.unsubscribe();
  }

  /**
   * Stops consuming. Handlers still running are aborted and their deliveries handed back; settlements
   * already under way (a retry or dead-letter copy waiting for its RECEIPT, then the ACK) finish
   * first, within `UNSUBSCRIBE_SETTLE_MS`, so the consumer never goes away under an ACK in flight.
   */
  async unsubscribe(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    this.handlers.abortAll(new Error("subscription closed"));
    for (const dropped of this.waiting.splice(0)) this.deps.guard.release(dropped.ticket);
    // Handlers that returned wait for their settleAfter (a lineage commit): settle those deliveries
    // rather than hand back messages whose work is done.
    await settleWithin(this.handlers.drain(), UNSUBSCRIBE_SETTLE_MS);
    if (this.settling.size > 0)
      await settleWithin(Promise.allSettled([...this.settling]), UNSUBSCRIBE_SETTLE_MS);
    this.detached = true;
    await this.current?.unsubscribe();
    this.current = undefined;
    this.deps.onClosed(this);
  }

  private receive(message: IMessage, generation: number, attachment: number): void {
    if (this.stopped || attachment !== this.attachment) return;
    let decoded: DecodedMessage;
    try {
      decoded = decodeMessage(message.headers, message.body);
    } catch (error) {
      // Not a Factflow message (no JSON body): keep it inspectable instead of looping on it.
      decoded = decodeMessage(message.headers, JSON.stringify(message.body));
      const { ticket } = this.deps.guard.admit(generation, attachment, this.identityOf(decoded));
      const subscriptionId = message.headers.subscription ?? "";
      const pending = { message, decoded, ticket, subscriptionId, group: undefined, undecodable: true };
      const verdict = undecodableVerdict(error instanceof Error ? error.message : String(error));
      this.settle(pending, verdict).catch((failure: unknown) => this.settlementFailed(failure));
      return;
    }
    const { ticket, reissue } = this.deps.guard.admit(generation, attachment, this.identityOf(decoded));
    if (decoded.redelivered || reissue) this.deps.counters.redelivered += 1;
    const group = this.groupOf(decoded);
    this.waiting.push({
      message,
      decoded,
      ticket,
      subscriptionId: message.headers.subscription ?? "",
      group,
    });
    this.pump();
  }

  /** One broker message in one queue: every topic subscription holds its own copy of the same SEND. */
  private identityOf(decoded: DecodedMessage): string | undefined {
    return decoded.sendId === undefined ? undefined : `${this.queueName}\n${decoded.sendId}`;
  }

  private groupOf(decoded: DecodedMessage): string | undefined {
    const key = this.deps.groupKey;
    // Messages without a key value form one group of their own (the kit's NO_GROUP_KEY).
    return key === undefined ? undefined : groupKeyOf(decoded.envelope, key);
  }

  private pump(): void {
    while (!this.stopped && this.running < this.deps.concurrency) {
      // The oldest delivery whose group is idle: order within a group, groups side by side.
      const index = this.waiting.findIndex((p) => p.group === undefined || !this.busyGroups.has(p.group));
      if (index < 0) return;
      const [next] = this.waiting.splice(index, 1);
      if (next !== undefined) void this.run(next);
    }
  }

  private async run(pending: Pending): Promise<void> {
    this.running += 1;
    if (pending.group !== undefined) this.busyGroups.add(pending.group);
    const { decoded } = pending;
    const delivery: Delivery = {
      message: decoded.envelope,
      destination: this.target.destination,
      subscription: this.name,
      attempt: decoded.attempt,
      redelivered: decoded.redelivered,
    };
    // Bounded whatever the handler does: a timeout settles at once, even if it never returns. The
    // group stays busy until the delivery is settled; the slot frees once the handler returned.
    const free = once(() => {
      this.running -= 1;
      this.pump();
    });
    const outcome = await this.handlers.run(this.handler, delivery, undefined, free);
    const context = {
      attempt: decoded.attempt,
      policy: this.deps.retry,
      isTopic: this.target.kind === "topic",
    };
    const work = this.settle(pending, decideSettlement(outcome, context));
    this.settling.add(work);
    try {
      await work;
    } catch (error) {
      this.settlementFailed(error);
    } finally {
      this.settling.delete(work);
      if (pending.group !== undefined) this.busyGroups.delete(pending.group);
      free();
      this.pump();
    }
  }

  /**
   * A copy (retry, dead letter) found no RECEIPT on a live connection: the original is still held
   * by this consumer and would only come back once the consumer goes away. Re-create the consumer
   * after a pause so the broker reissues it, instead of leaving the subscription a slot short.
   */
  private settlementFailed(error: unknown): void {
    this.deps.logger.warn("artemis: settlement failed; the delivery stays with the broker", {
      destination: this.destination,
      error: error instanceof Error ? error.message : String(error),
    });
    if (this.restartTimer !== undefined || this.stopped) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopped || !this.deps.link.isConnected) return;
      this.restart().catch(() => {});
    }, COPY_FAILURE_PAUSE_MS);
    this.restartTimer.unref();
  }

  /** Carries out the kit's verdict. */
  private async settle(pending: Pending, verdict: SettlementVerdict): Promise<void> {
    switch (verdict.kind) {
      case "ack":
        if (this.ack(pending)) this.reported(pending, verdict);
        return;
      case "hand-back":
        // Not settled: the broker hands it out again once this consumer is gone or replaced.
        this.deps.guard.release(pending.ticket);
        this.reported(pending, verdict);
        return;
      case "dead":
        if (await this.deadLetter(pending, verdict.reason, verdict.lastError))
          this.reported(pending, verdict);
        return;
      case "retry": {
        // The copy is a fresh SEND that arrives unflagged: the report counts an incomplete attempt.
        const headers = retryHeaders(
          pending.decoded.envelope.headers,
          verdict.nextAttempt,
          verdict.lastError,
        );
        const what = verdict.incomplete ? "redelivery" : "retry";
        const [destination, routing] =
          this.target.kind === "queue"
            ? ([this.queueName, "ANYCAST"] as const)
            : ([subscribeDestination(this.target, this.name), "MULTICAST"] as const);
        if (await this.copyThenAck(pending, destination, routing, headers, verdict.delayMs, what))
          this.reported(pending, verdict);
      }
    }
  }

  /** Counts and reports a verdict carried out on `pending`. */
  private reported(pending: Pending, verdict: SettlementVerdict): void {
    const { envelope, attempt } = pending.decoded;
    const identity =
      pending.undecodable === true
        ? { messageId: undefined, attempt: 1 }
        : { messageId: envelope.id, attempt };
    this.report.settled(verdict, identity, pending.undecodable === true);
  }

  private async deadLetter(
    pending: Pending,
    cause: DeadLetterReason,
    reason: string | undefined,
  ): Promise<boolean> {
    const origin =
      this.target.kind === "topic"
        ? { destination: this.destination, subscription: this.name }
        : { destination: this.destination };
    const { envelope } = pending.decoded;
    // The id again under a name Artemis selectors can match, so admin calls can pick one dead letter.
    const headers = {
      ...deadLetterHeaders(envelope.headers, cause, origin, reason),
      [DLQ_ID_HEADER]: envelope.id,
    };
    const dlq = deadLetterQueueName(this.target, this.name);
    return this.copyThenAck(pending, dlq, "ANYCAST", headers, 0, "dead letter");
  }

  /**
   * The copy is what preserves the message, so it must be confirmed (RECEIPT) before the original is
   * acknowledged. Without a receipt the original stays unsettled and the broker keeps it.
   */
  private async copyThenAck(
    pending: Pending,
    destination: string,
    routing: "ANYCAST" | "MULTICAST",
    headers: Record<string, string>,
    delayMs: number,
    what: string,
  ): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      if (!this.stillValid(pending)) return false;
      try {
        await this.deps.sendCopy(
          destination,
          routing,
          headers,
          JSON.stringify(pending.decoded.envelope.body),
          delayMs,
          `${what} of ${pending.decoded.envelope.id}`,
        );
        break;
      } catch (error) {
        // A RECEIPT that timed out on a live connection means the link is stalled: a re-send would
        // queue behind the first copy and land as a second duplicate once it flows. Give up instead;
        // the original stays unsettled and is reissued (settlementFailed re-creates the consumer).
        const timedOut = error instanceof ProviderError && error.reason === "timeout";
        if (attempt >= COPY_ATTEMPTS || timedOut) throw error;
      }
    }
    await this.deps.afterCopyConfirmed?.({ destination, what });
    return this.ack(pending);
  }

  /** False (and counted as superseded) when the guard says the ACK would hit a reissued delivery. */
  private stillValid(pending: Pending): boolean {
    if (this.detached) {
      // The consumer is gone: the broker has taken the delivery back, an ACK would hit nothing.
      this.deps.counters.superseded += 1;
      this.deps.guard.release(pending.ticket);
      return false;
    }
    const verdict = this.deps.guard.verdict(pending.ticket, this.deps.link.generation, this.attachment);
    if (verdict === undefined) return true;
    this.deps.counters.superseded += 1;
    this.deps.guard.release(pending.ticket);
    this.deps.logger.debug("artemis: settlement withheld", { destination: this.destination, verdict });
    return false;
  }

  /**
   * Acknowledges the original delivery; true when the ACK went out. Only a handler's ACKNOWLEDGED
   * counts as `acked`: settling an original behind a confirmed copy is counted by the copy.
   */
  private ack(pending: Pending): boolean {
    if (!this.stillValid(pending)) return false;
    const ackId = pending.message.headers.ack ?? pending.message.headers["message-id"] ?? "";
    const sent = this.deps.link.ack(ackId, pending.subscriptionId);
    this.deps.guard.release(pending.ticket);
    return sent;
  }
}
