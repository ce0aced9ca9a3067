import type { DurabilityCounters, Logger, MessageHandler, ProviderError } from "@factflow/protocols";
import {
  COPY_FAILURE_PAUSE_MS,
  type DecodedDelivery,
  type HandBackCause,
  type ResolvedSubscribeOptions,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
  type UndecodableDelivery,
} from "@factflow/provider-kit";
import type { IMessage } from "@stomp/stompjs";
import { classifyArtemisError } from "./classify-error.js";
import { type DecodedMessage, decodeFrame } from "./envelope-codec.js";
import { type ArtemisTarget, consumedQueueName, subscribeDestination } from "./naming.js";
import { type CopyConfirmed, sendSettlementCopy } from "./settlement-copy.js";
import type { DeliveryTicket, SettlementGuard } from "./settlement-guard.js";
import type { LinkSubscription, StompLink } from "./stomp-link.js";
import { consumerWindowBytes, subscribeHeaders } from "./subscribe-headers.js";

/** One STOMP delivery: the MESSAGE frame, its decoding and the settlement guard's ticket. */
interface Frame {
  readonly message: IMessage;
  readonly decoded: DecodedMessage;
  readonly error: string | undefined; // why it is not a Factflow message (dead-lettered unrun)
  readonly ticket: DeliveryTicket;
}

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly link: StompLink;
  readonly guard: SettlementGuard;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  /** Consumer window bytes per delivery of the prefetch (Artemis' window counts bytes). */
  readonly bytesPerMessage: number;
  readonly onStop: (subscription: ArtemisSubscription) => void;
  readonly afterCopyConfirmed?: CopyConfirmed;
}

/**
 * One STOMP consumer (`ack: client-individual`): the Artemis port of the kit's `SubscriptionRuntime`,
 * which runs the handlers and decides, carries out and reports settlements; the consumer window is
 * the flow control. The consumer is re-created on every new connection and on `restart`; the
 * settlement guard (`isCurrent`) withholds every ACK the broker would answer with an ERROR frame.
 * STOMP has no requeue: the broker reissues what a consumer held once that consumer goes.
 */
export class ArtemisSubscription implements SubscriptionPort<Frame> {
  readonly runtime: SubscriptionRuntime<Frame>;
  readonly name: string;
  private attachment = 0;
  private current: LinkSubscription | undefined;
  private deliver: ((frame: Frame, redelivered: boolean) => void) | undefined;
  private stopped = false;
  /** Set once the broker consumer is gone: no settlement may act for it any more. */
  private detached = false;
  private restartTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly target: ArtemisTarget,
    handler: MessageHandler,
    options: ResolvedSubscribeOptions,
    private readonly deps: SubscriptionDeps,
  ) {
    this.name = options.subscription;
    this.runtime = new SubscriptionRuntime({
      provider: "artemis",
      destination: target.destination,
      handler,
      options,
      port: this,
      counters: deps.counters,
      logger: deps.logger,
      onStop: () => deps.onStop(this),
    });
  }

  /** The Artemis queue this subscription consumes. */
  get queueName(): string {
    return consumedQueueName(this.target, this.name);
  }

  async receive(deliver: (frame: Frame, redelivered: boolean) => void): Promise<void> {
    this.deliver = deliver;
    await this.attach();
  }

  /**
   * SUBSCRIBEs on the current connection (on subscribe, after every reconnect, and on restart).
   * Deliveries of the old consumer are the broker's again: the waiting ones are dropped, and what
   * their running handlers return is withheld by the guard (counted superseded).
   */
  async attach(confirm = true): Promise<void> {
    if (this.stopped || this.deliver === undefined) return;
    this.attachment += 1;
    const attachment = this.attachment;
    this.runtime.dropStale();
    const windowBytes = consumerWindowBytes(this.runtime.prefetch, this.deps.bytesPerMessage);
    const subscription = await this.deps.link.subscribe(
      subscribeDestination(this.target, this.name),
      subscribeHeaders(this.target.kind, windowBytes),
      (message, generation) => this.arrived(message, generation, attachment),
      confirm,
    );
    if (this.stopped) {
      await subscription.unsubscribe();
    } else if (attachment === this.attachment) {
      this.current = subscription;
    } else {
      // A later attach overlapped this one and won: this consumer's deliveries are never handled
      // (arrived() ignores them), so it must go, or the broker would hold them for it for ever.
      await subscription.unsubscribe().catch((error: unknown) => this.log("debug", "unsubscribe", error));
    }
  }

  /** Replaces the broker consumer on the same connection; the broker reissues what the old one held. */
  async restart(): Promise<void> {
    const old = this.current;
    try {
      await this.attach();
    } catch (error) {
      // Unconfirmed (a stalled link): the old consumer holds deliveries no handler sees. Try again.
      this.log("warn", "replace the consumer", error);
      this.restartLater(COPY_FAILURE_PAUSE_MS);
      throw error;
    }
    await old?.unsubscribe();
  }

  /** Restarts after `delayMs`, once for any number of calls meanwhile. */
  private restartLater(delayMs: number): void {
    if (this.restartTimer !== undefined || this.stopped) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (!this.stopped && this.deps.link.isConnected) this.restart().catch(() => {});
    }, delayMs);
    this.restartTimer.unref();
  }

  private arrived(message: IMessage, generation: number, attachment: number): void {
    if (this.stopped || attachment !== this.attachment) return;
    const { decoded, error } = decodeFrame(message.headers, message.body);
    // One broker message in one queue: every topic subscription holds its own copy of the same SEND.
    const identity = decoded.sendId === undefined ? undefined : `${this.queueName}\n${decoded.sendId}`;
    const { ticket, reissue } = this.deps.guard.admit(generation, attachment, identity);
    this.deliver?.({ message, decoded, error, ticket }, decoded.redelivered || reissue);
  }

  async stopReceiving(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.restartTimer);
  }

  decode({ decoded, error }: Frame): DecodedDelivery | UndecodableDelivery {
    return error === undefined ? decoded : { error, headers: decoded.envelope.headers };
  }

  isCurrent({ ticket }: Frame): boolean {
    const { guard, link } = this.deps;
    return !this.detached && guard.verdict(ticket, link.generation, this.attachment) === undefined;
  }

  ack({ message }: Frame): boolean {
    const { headers } = message;
    return this.deps.link.ack(headers.ack ?? headers["message-id"] ?? "", headers.subscription ?? "");
  }

  /**
   * Nothing to send. A copy that failed (after the runtime's pause) leaves its original with a
   * consumer that lives on, so the consumer is replaced and the broker hands the original out again.
   */
  handBack(_frame: Frame, cause: HandBackCause): boolean {
    if (cause === "copy-failed") this.restartLater(0);
    return true;
  }

  publishCopy({ decoded }: Frame, copy: SettlementCopy): Promise<"confirmed"> {
    return sendSettlementCopy(this.deps.link, this.target, this.name, decoded.envelope, copy, this.deps);
  }

  classifyError(error: unknown, operation: string): ProviderError {
    return classifyArtemisError(error, operation);
  }

  release({ ticket }: Frame): void {
    this.deps.guard.release(ticket);
  }

  async close(): Promise<void> {
    this.detached = true;
    await this.current?.unsubscribe();
    this.current = undefined;
  }

  private log(level: "debug" | "warn", operation: string, error: unknown): void {
    const { destination } = this.target;
    const { message } = this.classifyError(error, operation);
    this.deps.logger[level](`artemis: could not ${operation}`, { destination, error: message });
  }
}
