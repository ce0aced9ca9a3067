/**
 * The seam between the provider and a Pulsar client library. Only the WebSocket transport
 * (`ws-transport.ts`, Pulsar's WebSocket API through the `ws` package) exists: the native
 * `pulsar-client` package downloads libpulsar from outside the npm registry at install time, which
 * the machines Factflow is built on cannot reach. A native transport would implement these two
 * links with a `Producer` and a `Consumer` of that library.
 */

/** One message as a consumer link hands it over. */
export interface IncomingMessage {
  /** The broker's message id, opaque; pass it back to `ack` / `nack`. */
  readonly messageId: string;
  /** Payload, base64. */
  readonly payload: string;
  /** ISO-8601 publish time the broker recorded. */
  readonly publishTime: string | undefined;
  /** How often the broker handed this message to the subscription before (0 the first time). */
  readonly redeliveryCount: number;
}

/** One message as a producer link sends it. */
export interface OutgoingMessage {
  /** Payload, base64. */
  readonly payload: string;
  /** Hold the message back this long (Pulsar `deliverAfterMs`; Shared subscriptions only). */
  readonly deliverAfterMs?: number;
  /** Routing key (Key_Shared subscriptions order per key). */
  readonly key?: string;
}

/** Why a link closed: `local` when this side closed it. */
export type CloseCause = { readonly kind: "local" } | { readonly kind: "remote"; readonly detail: string };

/** A producer on one topic. */
export interface ProducerLink {
  readonly closed: boolean;
  /** Resolves with the broker's message id once it has stored the message; rejects on error or timeout. */
  send(message: OutgoingMessage, timeoutMs: number): Promise<string>;
  /** Closes at once; pending sends reject. */
  close(): void;
  onClose(listener: (cause: CloseCause) => void): void;
}

/** Subscription options a consumer link is opened with. */
export interface ConsumerOptions {
  /**
   * `Shared`: competing consumers, any order. `Failover`: one active consumer per subscription
   * (the others stand by and take over when it goes), which sees the topic in publish order.
   */
  readonly subscriptionType: PulsarSubscriptionType;
  /** The broker-side receive queue of the consumer (bounds what one consumer takes ahead of others). */
  readonly receiverQueueSize: number;
  /** Pulsar's fixed delay before a negatively acknowledged message comes back, in ms. */
  readonly negativeAckRedeliveryDelayMs: number;
}

/** The Pulsar subscription types the provider uses. */
export type PulsarSubscriptionType = "Shared" | "Key_Shared" | "Failover";

/** A consumer on one subscription of one topic, with flow control by permits. */
export interface ConsumerLink {
  readonly closed: boolean;
  onMessage(listener: (message: IncomingMessage) => void): void;
  onClose(listener: (cause: CloseCause) => void): void;
  /** Lets the broker hand over `n` more messages. */
  permit(n: number): void;
  ack(messageId: string): void;
  /** Gives the message back; the broker redelivers it after the negative-ack delay. */
  nack(messageId: string): void;
  /** Closes; unacknowledged messages go back to the subscription. */
  close(): void;
}

/** Opens links to one broker. */
export interface PulsarTransport {
  readonly kind: string;
  openProducer(topic: string): Promise<ProducerLink>;
  openConsumer(topic: string, subscription: string, options: ConsumerOptions): Promise<ConsumerLink>;
  /** Sockets opened so far (for tests and tooling). */
  openedCount(): number;
  /** Closes every link this transport opened. */
  closeAll(): void;
}
