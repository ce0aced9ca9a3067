import {
  type Delivery,
  type DurabilityCounters,
  isSettlingStatus,
  type Logger,
  type MessageHandler,
  ProviderError,
  type RetryPolicy,
  retryDelayMs,
  type Subscription,
  unwrapHandlerResult,
} from "@factflow/protocols";
import type { IMessage } from "@stomp/stompjs";
import { type DecodedMessage, decodeMessage } from "./envelope-codec.js";
import { type DeadLetterCause, deadLetterHeaders, retryHeaders } from "./failure-copy.js";
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
  /** Top-level body field naming a message's FIFO group: one message per group at a time, in order. */
  readonly groupBy?: string;
  readonly retry: RetryPolicy;
  readonly concurrency: number;
  readonly handlerTimeoutMs: number;
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
/** Pause before re-creating a consumer whose delivery could not be settled. */
const SETTLEMENT_RETRY_PAUSE_MS = 1_000;

/**
 * One Factflow subscription: a STOMP consumer (`ack: client-individual`) re-created on every new
 * connection, a local queue of deliveries waiting for a handler slot, and handler-return settlement.
 */
export class ArtemisSubscription implements Subscription {
  readonly destination: string;
  private attachment = 0;
  private current: LinkSubscription | undefined;
  private readonly waiting: Pending[] = [];
  /** Running handlers, with the consumer attachment each delivery came from. */
  private readonly running = new Map<AbortController, number>();
  /** Groups with a delivery in a handler (or settling) right now. */
  private readonly busyGroups = new Set<string>();
  private stopped = false;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly target: ArtemisTarget,
    readonly name: string,
    private readonly handler: MessageHandler,
    private readonly deps: SubscriptionDeps,
  ) {
    this.destination = target.destination;
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
    // Handlers of the old consumer cannot settle any more (the broker reissues their deliveries):
    // tell them to stop; whatever they return is withheld by the settlement guard.
    for (const [controller, from] of this.running)
      if (from < attachment) controller.abort(new Error("delivery superseded: the consumer was re-created"));
    const subscription = await this.deps.link.subscribe(
      subscribeDestination(this.target, this.name),
      subscribeHeaders(this.target.kind, this.deps.windowBytes),
      (message, generation) => this.receive(message, generation, attachment),
      confirm,
    );
    if (attachment === this.attachment) this.current = subscription;
    if (this.stopped) await subscription.unsubscribe();
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

  async unsubscribe(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    for (const controller of this.running.keys()) controller.abort(new Error("subscription closed"));
    this.waiting.length = 0;
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
      this.deadLetter(
        { message, decoded, ticket, subscriptionId: message.headers.subscription ?? "", group: undefined },
        "rejected",
        String(error),
      ).catch((failure: unknown) => this.settlementFailed(failure));
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
    const field = this.deps.groupBy;
    if (field === undefined) return undefined;
    const body = decoded.envelope.body;
    const value = body !== null && typeof body === "object" && !Array.isArray(body) ? body[field] : undefined;
    // Messages without the field form one group of their own.
    return value === undefined ? "\u0000" : JSON.stringify(value);
  }

  private pump(): void {
    while (!this.stopped && this.running.size < this.deps.concurrency) {
      // The oldest delivery whose group is idle: order within a group, groups side by side.
      const index = this.waiting.findIndex((p) => p.group === undefined || !this.busyGroups.has(p.group));
      if (index < 0) return;
      const [next] = this.waiting.splice(index, 1);
      if (next !== undefined) void this.run(next);
    }
  }

  private async run(pending: Pending): Promise<void> {
    const controller = new AbortController();
    this.running.set(controller, pending.ticket.attachment);
    if (pending.group !== undefined) this.busyGroups.add(pending.group);
    const timer = setTimeout(
      () => controller.abort(new Error(`handler timed out after ${this.deps.handlerTimeoutMs} ms`)),
      this.deps.handlerTimeoutMs,
    );
    const { envelope } = pending.decoded;
    const delivery: Delivery = {
      message: envelope,
      destination: this.target.destination,
      subscription: this.name,
      attempt: pending.decoded.attempt,
      redelivered: pending.decoded.redelivered,
    };
    let status: string | undefined;
    let reason: string | undefined;
    try {
      const result = unwrapHandlerResult(await this.handler(delivery, controller.signal));
      status = result.status;
      reason = result.reason;
    } catch (error) {
      reason = error instanceof Error ? error.message : String(error);
    } finally {
      clearTimeout(timer);
    }
    try {
      if (controller.signal.aborted && this.stopped) return; // the broker hands it out again
      await this.settle(pending, isSettlingStatus(status) ? status : undefined, reason);
    } catch (error) {
      this.settlementFailed(error);
    } finally {
      this.running.delete(controller);
      if (pending.group !== undefined) this.busyGroups.delete(pending.group);
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
    }, SETTLEMENT_RETRY_PAUSE_MS);
    this.restartTimer.unref();
  }

  private async settle(
    pending: Pending,
    status: string | undefined,
    reason: string | undefined,
  ): Promise<void> {
    const { decoded } = pending;
    if (status === "ACKNOWLEDGED") {
      if (this.ack(pending)) this.deps.counters.acked += 1;
      return;
    }
    if (status === "REJECTED") return this.deadLetter(pending, "rejected", reason);
    if (status === "FAILED") {
      if (this.target.kind === "topic") return this.deadLetter(pending, "topic-failure", reason);
      if (decoded.attempt >= this.deps.retry.maxAttempts)
        return this.deadLetter(pending, "exhausted", reason);
      const next = decoded.attempt + 1;
      const headers = retryHeaders(decoded.envelope, next, reason);
      return this.copyThenAck(
        pending,
        this.queueName,
        "ANYCAST",
        headers,
        retryDelayMs(this.deps.retry, next),
        "retry",
        () => {
          this.deps.counters.retried += 1;
        },
      );
    }
    // Incomplete (an internal status, a throw, a timeout): hand it out again with the same attempt.
    // The copy is a fresh SEND that arrives unflagged, so the redelivery is counted here.
    const headers = { ...decoded.envelope.headers };
    const redelivered = () => {
      this.deps.counters.redelivered += 1;
    };
    if (this.target.kind === "queue") {
      return this.copyThenAck(pending, this.queueName, "ANYCAST", headers, 0, "redelivery", redelivered);
    }
    return this.copyThenAck(
      pending,
      subscribeDestination(this.target, this.name),
      "MULTICAST",
      headers,
      0,
      "redelivery",
      redelivered,
    );
  }

  private async deadLetter(
    pending: Pending,
    cause: DeadLetterCause,
    reason: string | undefined,
  ): Promise<void> {
    const origin =
      this.target.kind === "topic"
        ? { destination: this.destination, subscription: this.name }
        : { destination: this.destination };
    const headers = deadLetterHeaders(pending.decoded.envelope, cause, origin, reason);
    const dlq = deadLetterQueueName(this.target, this.name);
    await this.copyThenAck(pending, dlq, "ANYCAST", headers, 0, "dead letter", () => {
      this.deps.counters.deadLettered += 1;
    });
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
    onCopied: () => void,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      if (!this.stillValid(pending)) return;
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
    onCopied();
    await this.deps.afterCopyConfirmed?.({ destination, what });
    this.ack(pending);
  }

  /** False (and counted as superseded) when the guard says the ACK would hit a reissued delivery. */
  private stillValid(pending: Pending): boolean {
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
