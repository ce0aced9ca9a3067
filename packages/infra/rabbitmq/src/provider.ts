import {
  type Logger,
  type ProviderCapabilities,
  ProviderError,
  type QueueProtocol,
} from "@factflow/protocols";
import {
  destinationMemo,
  emptyDurabilityCounters,
  guardProvider,
  KnownDestinations,
  providerLogger,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import { RabbitMqAdmin } from "./admin.js";
import { classifyAmqpError } from "./classify-error.js";
import { parseRabbitMqConfig, type RabbitMqConfig, type RabbitMqConfigInput } from "./config.js";
import { ConnectionManager } from "./connection-manager.js";
import { type EncodedMessage, encodeMessage } from "./envelope-codec.js";
import { resolveDestination, retryQueueName } from "./naming.js";
import { Publisher } from "./publisher.js";
import { planSubscription } from "./subscribe-plan.js";
import { RabbitSubscription } from "./subscription.js";
import { MAX_REMEMBERED_NAMES, Topology } from "./topology.js";

/** Options besides the config. */
export interface RabbitMqProviderOptions {
  /** @default silentLogger */
  readonly logger?: Logger;
}

/** A RabbitMQ provider: the `QueueProtocol` plus tooling hooks. */
export interface RabbitMqProvider extends QueueProtocol {
  readonly config: RabbitMqConfig;
  /** Connections opened so far (1 after `connect`, +1 per reconnect). */
  connectionCount(): number;
  /** Deletes every queue and exchange this instance declared. For tests and tooling; destroys messages. */
  deleteDeclaredTopology(): Promise<void>;
  /** Names of every queue and exchange this instance declared (holding and dead-letter queues included). */
  declaredNames(): { readonly queues: readonly string[]; readonly exchanges: readonly string[] };
}

/** What RabbitMQ 3.x can do, as the conformance suite reads it. */
export const RABBITMQ_CAPABILITIES: ProviderCapabilities = Object.freeze({
  priorities: true,
  retryDelay: "exponential",
  // A holding queue's TTL expires at the head with millisecond precision; the hop back adds a few ms.
  delayGranularityMs: 10,
  fifo: true,
  // Single-active-consumer queue + the kit's group lanes (see subscribe-plan.ts).
  messageGroups: true,
  orderedGroups: true,
  immutablePriority: true,
  durable: true,
  maxMessageBytes: 16_777_216,
});

/**
 * Creates a RabbitMQ (AMQP 0-9-1) provider. Nothing connects until `connect()`.
 *
 * @example
 * const provider = createRabbitMqProvider({ url: process.env.RABBITMQ_URL });
 * await provider.connect();
 */
export function createRabbitMqProvider(
  input: RabbitMqConfigInput = {},
  options: RabbitMqProviderOptions = {},
): RabbitMqProvider {
  const config = parseRabbitMqConfig(input);
  const logger = providerLogger("rabbitmq", options.logger);
  const counters = emptyDurabilityCounters();
  // Publishing gets a connection of its own: when RabbitMQ throttles a publishing connection
  // (credit flow, or `connection.blocked`), it stops reading from it, and acks sharing that socket
  // would wait behind the throttled publishes, stalling every consumer.
  const connection = new ConnectionManager(config, logger);
  const publishConnection = new ConnectionManager(
    { ...config, connectionName: `${config.connectionName}-publish` },
    logger,
  );
  const topology = new Topology(connection, config, logger);
  const publisher = new Publisher(publishConnection, config, logger);
  const subscriptions = new Set<RabbitSubscription>();
  const known = new KnownDestinations(MAX_REMEMBERED_NAMES);
  const resolveCached = destinationMemo(resolveDestination);

  const admin = new RabbitMqAdmin({
    config,
    connection,
    topology,
    destinations: () => known.list(),
    inFlight: (queue) => {
      let total = 0;
      for (const s of subscriptions) if (s.route.sourceQueue === queue) total += s.runtime.unsettled;
      return total;
    },
  });

  /** How each live subscription declares its topology again. */
  const declareFor = new WeakMap<RabbitSubscription, () => Promise<void>>();

  // After a reconnect the broker may have restarted (and lost non-durable state): re-declare lazily and resubscribe.
  connection.onConnected(async (live) => {
    if (live.generation > 1) topology.forget();
    for (const subscription of subscriptions) {
      try {
        await declareFor.get(subscription)?.();
        await subscription.attach(live);
      } catch (error) {
        logger.warn("rabbitmq resubscribe failed after reconnect; retrying", {
          destination: subscription.route.destination,
          error: error instanceof Error ? error.message : String(error),
        });
        subscription.scheduleReattach(live);
      }
    }
  });

  /**
   * Publishes to a queue (`exchange` "") or a fanout exchange, directly or through the holding queue
   * of `delay`. Queue publishes are mandatory, so an unroutable message is an error; a topic with no
   * subscription drops the message by design (broadcast), so topic publishes are not.
   */
  const sendTo = async (
    base: string,
    exchange: string,
    delay: number,
    describe: string,
    encoded: EncodedMessage,
  ) => {
    if (delay > 0) {
      const holding = retryQueueName(base, delay);
      await topology.declareHoldingQueue(holding, delay, exchange, exchange === "" ? base : "");
      await publisher.publish({ exchange: "", routingKey: holding, mandatory: true, describe }, encoded);
    } else if (exchange === "") {
      await publisher.publish({ exchange: "", routingKey: base, mandatory: true, describe }, encoded);
    } else {
      await publisher.publish({ exchange, routingKey: "", mandatory: false, describe }, encoded);
    }
  };

  // The kit's guard adds the lifecycle (connect once, close once, no use before connect or after
  // close) and validates subscribe options against the capabilities before they reach this object.
  const provider: UnguardedProvider<RabbitMqProvider> = {
    name: "rabbitmq",
    config,
    capabilities: Object.freeze({ ...RABBITMQ_CAPABILITIES, maxMessageBytes: config.maxMessageBytes }),
    admin,

    async connect() {
      try {
        await Promise.all([connection.connect(), publishConnection.connect()]);
      } catch (error) {
        // Do not leave one of the two connections open when the other failed; connect() may be retried.
        await Promise.allSettled([connection.abandon(), publishConnection.abandon()]);
        throw error;
      }
      Object.assign(counters, emptyDurabilityCounters());
    },

    async close() {
      // Closing the connections cancels every consumer and requeues what is unacked, so channels are
      // not closed one by one (each a round trip a stalled broker would never answer).
      await Promise.allSettled([...subscriptions].map((s) => s.stop(true)));
      await Promise.all([connection.close(), publishConnection.close()]);
    },

    async publish(destination, message) {
      const target = resolveCached(destination);
      const encoded = encodeMessage(destination, message, config.maxMessageBytes);
      const delay = message.delayMs ?? 0;
      known.remember(destination, target.kind);
      // Counted once per caller publish; retry and dead-letter copies are counted as retried/deadLettered.
      counters.published += 1;
      if (target.kind === "queue") {
        if (!topology.hasQueue(target.queue)) await topology.ensureQueue(target.queue, destination);
        try {
          await sendTo(target.queue, "", delay, destination, encoded);
        } catch (error) {
          // The queue vanished behind our back: this publish fails (unroutable), the next one
          // checks and declares it again.
          if (error instanceof ProviderError && error.reason === "not-found")
            topology.forgetQueue(target.queue);
          throw error;
        }
        counters.confirmed += 1;
        return { id: encoded.id };
      }
      await topology.declareExchange(target.exchange, destination);
      try {
        await sendTo(target.exchange, target.exchange, delay, destination, encoded);
      } catch (error) {
        if (!(error instanceof ProviderError && error.reason === "not-found")) throw error;
        // The exchange (or holding queue) was deleted behind our back: declare again, retry once.
        topology.forgetExchange(target.exchange);
        topology.forgetQueue(retryQueueName(target.exchange, delay));
        await topology.declareExchange(target.exchange, destination);
        // Deleting the exchange removed its bindings: restore those of this process's subscriptions.
        for (const subscription of subscriptions) {
          if (subscription.route.kind === "topic" && subscription.route.destination === destination) {
            await topology.bind(subscription.route.sourceQueue, target.exchange, destination);
          }
        }
        await sendTo(target.exchange, target.exchange, delay, destination, encoded);
      }
      counters.confirmed += 1;
      return { id: encoded.id };
    },

    async subscribe(destination, handler, options) {
      const { target, route, shape } = planSubscription(destination, options);
      const { sourceQueue } = route;
      /** Declares the subscription's topology; `fresh` ignores what is remembered (something was deleted). */
      const declare = async (fresh = false) => {
        if (fresh) {
          topology.forgetQueue(sourceQueue);
          topology.forgetQueue(route.deadLetterQueue);
          if (target.kind === "topic") topology.forgetExchange(target.exchange);
        }
        if (target.kind === "topic") await topology.declareExchange(target.exchange, destination);
        await topology.declareQueue(sourceQueue, shape, destination);
        if (target.kind === "topic") await topology.bind(sourceQueue, target.exchange, destination);
        await topology.ensureQueue(route.deadLetterQueue, `${destination} (dead letters)`);
      };
      await declare();
      known.remember(destination, target.kind, options.subscription);
      const deps = { config, connection, publisher, topology, counters, logger, declare };
      const onStop = (s: RabbitSubscription) => subscriptions.delete(s);
      const subscription = new RabbitSubscription({ ...deps, onStop }, route, handler, options);
      declareFor.set(subscription, declare);
      subscriptions.add(subscription);
      try {
        await subscription.runtime.start();
      } catch (error) {
        throw classifyAmqpError(error, `subscribe to "${destination}"`, config.url);
      }
      return subscription.runtime;
    },

    counters() {
      return { ...counters };
    },

    connectionCount() {
      return connection.connectCount;
    },

    declaredNames() {
      return { queues: [...topology.declaredQueues], exchanges: [...topology.declaredExchanges] };
    },

    async deleteDeclaredTopology() {
      await topology.deleteDeclared();
    },
  };
  return guardProvider(provider, { factory: "createRabbitMqProvider()" });
}
