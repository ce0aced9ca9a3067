import type { ProviderCapabilities } from "./capabilities.js";
import type { MessageHandler } from "./delivery.js";
import type { OutboundMessage } from "./envelope.js";
import type { DurabilityCounters, QueueAdminProtocol } from "./queue-admin.js";
import type { SubscribeOptions, Subscription } from "./subscribe-options.js";

/** Result of a publish the broker has taken. */
export interface PublishReceipt {
  readonly id: string;
}

/**
 * The port every queue provider implements. A provider written outside this repository implements
 * exactly this and proves it with `@factflow/infra-testkit`.
 *
 * - `publish` resolves only once the broker has the message (receipt, confirm or fsync) and rejects
 *   with a `ProviderError` otherwise; it never hangs.
 * - `subscribe` resolves once the broker has registered the consumer, so a message published after it
 *   resolves reaches this subscription.
 * - Settlement follows the handler's return value; there is no manual ack.
 * - After `close()`, every call rejects with a `ProviderError` whose code is `provider_closed`.
 */
export interface QueueProtocol {
  /** Provider name, e.g. `embedded`, `rabbitmq`, `artemis`. */
  readonly name: string;
  readonly capabilities: ProviderCapabilities;
  readonly admin: QueueAdminProtocol;
  /** Opens connections and recovers durable state. Idempotent. */
  connect(): Promise<void>;
  /** Stops every subscription (aborting handlers; their messages are redelivered later) and disconnects. Idempotent. */
  close(): Promise<void>;
  publish(destination: string, message: OutboundMessage): Promise<PublishReceipt>;
  subscribe(destination: string, handler: MessageHandler, options: SubscribeOptions): Promise<Subscription>;
  /** A snapshot of the durability counters since connect. */
  counters(): DurabilityCounters;
  /**
   * Damage the provider found and worked around (e.g. unreadable journal records skipped on
   * recovery): the server reports it as `degraded` in `/readyz`, a metric and the API. Optional.
   */
  health?(): ProviderHealth;
  /**
   * Told by a cluster that the server whose node id is `node` is dead (its lease expired): hands that
   * server's unsettled deliveries to live consumers now. Optional: only for a broker that would keep
   * them until a timeout of its own (Redis keeps a dead consumer's pending entries for the visibility
   * timeout); brokers that requeue on a lost connection need nothing.
   */
  claimFromNode?(node: string): Promise<void>;
}

/** What `QueueProtocol.health` reports. */
export interface ProviderHealth {
  /** One sentence per problem, saying what happened and what was done about it; empty when healthy. */
  readonly problems: readonly string[];
}

/** A factory the conformance suite and the server call to build a fresh, unconnected provider. */
export type QueueProviderFactory = () => QueueProtocol | Promise<QueueProtocol>;
