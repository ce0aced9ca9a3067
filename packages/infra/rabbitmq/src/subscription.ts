import type { DurabilityCounters, Logger, MessageHandler, ProviderError } from "@factflow/protocols";
import {
  type DecodedDelivery,
  type ResolvedSubscribeOptions,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
  type UndecodableDelivery,
} from "@factflow/provider-kit";
import type { Channel, ConsumeMessage } from "amqplib";
import { classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager, LiveConnection } from "./connection-manager.js";
import { decodeMessage, stringHeaders } from "./envelope-codec.js";
import { type FailureRoute, publishCopy } from "./failure-router.js";
import { handBackAndClose } from "./hand-back.js";
import type { Publisher } from "./publisher.js";
import type { Topology } from "./topology.js";

/** A consumer channel. Settlements are only sent on the attachment a delivery arrived on. */
type Attachment = { readonly channel: Channel; consumerTag?: string; closed: boolean };
/** One delivery and the channel it arrived on. */
type Held = { readonly message: ConsumeMessage; readonly attachment: Attachment };

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: RabbitMqConfig;
  readonly connection: ConnectionManager;
  readonly publisher: Publisher;
  readonly topology: Topology;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  /** Re-declares the subscription's queues; `fresh` skips what the topology cache remembers. */
  readonly declare: (fresh?: boolean) => Promise<void>;
  readonly onStop: (subscription: RabbitSubscription) => void;
}

/**
 * One consumer on one AMQP queue, on its own channel: the RabbitMQ port of the kit's
 * `SubscriptionRuntime` (which runs the handlers, decides and reports settlements); the prefetch is
 * the flow control. A delivery is settled only on the channel it arrived on: once that channel
 * closed, the broker has put it back (`isCurrent` false). A channel closed under a live connection
 * (often: its queue was deleted) is re-declared and re-attached with backoff; after a reconnect the
 * provider re-attaches every subscription.
 */
export class RabbitSubscription implements SubscriptionPort<Held> {
  readonly runtime: SubscriptionRuntime<Held>;
  private attachment: Attachment | undefined;
  private deliver: ((delivery: Held, redelivered: boolean) => void) | undefined;
  private stopped = false;
  /** The provider closes the whole connection, which cancels and requeues by itself. */
  private connectionClosing = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: SubscriptionDeps,
    readonly route: FailureRoute,
    handler: MessageHandler,
    options: ResolvedSubscribeOptions,
  ) {
    this.runtime = new SubscriptionRuntime({
      provider: "rabbitmq",
      destination: route.destination,
      handler,
      options,
      port: this,
      counters: deps.counters,
      logger: deps.logger,
      onStop: () => deps.onStop(this),
    });
  }

  async receive(deliver: (delivery: Held, redelivered: boolean) => void): Promise<void> {
    this.deliver = deliver;
    const { connection, config } = this.deps;
    const describe = `subscribe to "${this.route.destination}"`;
    await this.attach(await connection.waitForConnection(Date.now() + config.publishTimeoutMs, describe));
  }

  /** Opens a channel on `live` and starts consuming; resolves once the broker registered the consumer. */
  async attach(live: LiveConnection): Promise<void> {
    const deliver = this.deliver;
    if (this.stopped || deliver === undefined) return;
    const channel = await live.model.createChannel();
    const attachment: Attachment = { channel, closed: false };
    channel.on("error", (error: Error) => this.warn("consumer channel error", "consumer channel", error));
    channel.on("close", () => this.detached(attachment, live));
    this.attachment = attachment;
    await channel.prefetch(this.runtime.prefetch);
    const consume = (message: ConsumeMessage | null) => {
      // Null: the broker cancelled the consumer (queue deleted): re-declare and consume again.
      if (message === null) void channel.close().catch(() => {});
      else if (!attachment.closed) deliver({ message, attachment }, message.fields.redelivered);
    };
    const ok = await channel.consume(this.route.sourceQueue, consume, { noAck: false });
    attachment.consumerTag = ok.consumerTag;
  }

  private detached(attachment: Attachment, live: LiveConnection): void {
    attachment.closed = true;
    // Deliveries of a closed channel are back in the queue; drop the waiting ones unhandled.
    this.runtime.dropStale();
    if (this.attachment !== attachment) return;
    this.attachment = undefined;
    // On a lost connection the provider re-attaches every subscription after reconnecting.
    if (!this.stopped && this.deps.connection.current() === live) this.scheduleReattach(live);
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
          this.warn("re-subscribe failed; retrying", "re-subscribe", error);
          if (this.attachment?.closed !== false) this.attachment = undefined;
          this.scheduleReattach(live, Math.min(delayMs * 2, this.deps.config.reconnectMaxDelayMs));
        });
    }, delayMs);
  }

  /**
   * The runtime's stop; with `connectionClosing` (the provider closes the connection next, which
   * cancels and requeues by itself) without the per-channel round trips a stalled broker may not answer.
   */
  stop(connectionClosing: boolean): Promise<void> {
    this.connectionClosing ||= connectionClosing;
    return this.runtime.unsubscribe();
  }

  async stopReceiving(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const open = this.open();
    if (open?.consumerTag !== undefined) await open.channel.cancel(open.consumerTag);
  }

  /** The live channel, unless the provider closes the connection (which cancels and requeues by itself). */
  private open(): Attachment | undefined {
    return this.connectionClosing || this.attachment?.closed !== false ? undefined : this.attachment;
  }

  decode({ message }: Held): DecodedDelivery | UndecodableDelivery {
    const decoded = decodeMessage(message);
    return "error" in decoded ? { error: decoded.error, headers: stringHeaders(message) } : decoded;
  }

  isCurrent(held: Held): boolean {
    return !held.attachment.closed && this.attachment === held.attachment;
  }

  ack(held: Held): boolean {
    return this.send(held, "ack");
  }

  handBack(held: Held): boolean {
    return this.send(held, "requeue");
  }

  async publishCopy(held: Held, copy: SettlementCopy): Promise<"confirmed"> {
    await publishCopy(this.deps.publisher, this.deps.topology, this.route, held.message, copy);
    return "confirmed";
  }

  classifyError(error: unknown, operation: string): ProviderError {
    return classifyAmqpError(error, operation, this.deps.config.url);
  }

  /** Puts back what the channel still holds and closes it (nothing when the connection closes). */
  async close(): Promise<void> {
    const open = this.open();
    this.attachment = undefined;
    if (open !== undefined) await handBackAndClose(open.channel, this.route.sourceQueue);
  }

  private warn(what: string, operation: string, error: unknown): void {
    const { message } = this.classifyError(error, operation);
    this.deps.logger.warn(`rabbitmq ${what}`, { destination: this.route.destination, error: message });
  }

  /**
   * Sends an ack or a nack-requeue on the delivery's own channel. A channel that closed under us
   * (the close event may not have arrived yet) throws; the settlement is then withheld, the broker
   * having already put the delivery back.
   */
  private send({ message, attachment }: Held, kind: "ack" | "requeue"): boolean {
    try {
      if (kind === "ack") attachment.channel.ack(message);
      else attachment.channel.nack(message, false, true);
      return true;
    } catch {
      attachment.closed = true;
      return false;
    }
  }
}
