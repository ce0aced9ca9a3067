import type { Logger, ProviderCapabilities, QueueProtocol } from "@factflow/protocols";
import {
  destinationMemo,
  emptyDurabilityCounters,
  guardProvider,
  KnownDestinations,
  providerLogger,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import { PulsarAdmin } from "./admin.js";
import { encodeMessage } from "./codec.js";
import { type PulsarConfig, type PulsarConfigInput, parsePulsarConfig } from "./config.js";
import { resolveDestination, routeOf } from "./naming.js";
import { planConsumption } from "./ordered-plan.js";
import { Producers } from "./producers.js";
import { PulsarRest } from "./rest.js";
import { PulsarSubscription } from "./subscription.js";
import { Topics } from "./topics.js";
import type { PulsarTransport } from "./transport.js";
import { WsTransport } from "./ws-transport.js";

/** Options besides the config. */
export interface PulsarProviderOptions {
  /** @default silentLogger */
  readonly logger?: Logger;
  /** The client library seam; defaults to the WebSocket transport on `config.url`. */
  readonly transport?: (config: PulsarConfig) => PulsarTransport;
}

/** A Pulsar provider: the `QueueProtocol` plus tooling hooks. */
export interface PulsarProvider extends QueueProtocol {
  readonly config: PulsarConfig;
  /** Which transport carries the messages (`websocket`). */
  readonly transportKind: string;
  /** Sockets opened so far (producers, consumers, admin scans). */
  connectionCount(): number;
  /**
   * Deletes the topics behind `destination` (its dead-letter and retry topics too), after closing this
   * instance's consumers of it. For tests and tooling; destroys messages.
   */
  destroy(destination: string): Promise<void>;
}

/** What Pulsar 4 over the WebSocket API can do, as the conformance suite reads it. */
export const PULSAR_CAPABILITIES: ProviderCapabilities = Object.freeze({
  priorities: false,
  // Each retry copy carries its own deliverAfterMs, so the policy's exponential backoff holds.
  retryDelay: "exponential",
  // The broker's delayed-delivery tracker ticks every delayedDeliveryTickTimeMillis (100 ms here).
  delayGranularityMs: 100,
  // Ordered routes consume through a Failover subscription (one active consumer sees the topic in
  // publish order) and the kit's lanes, which retry in place (see ordered-plan.ts).
  fifo: true,
  messageGroups: true,
  orderedGroups: true,
  durable: true,
  maxMessageBytes: 4_194_304,
  // The subscription backlogs of the topic and its retry topic: every unacknowledged message,
  // delayed retries and other consumers' deliveries included.
  brokerWideStats: true,
});

/**
 * Creates an Apache Pulsar provider over Pulsar's WebSocket API. Nothing connects until `connect()`.
 *
 * @example
 * const provider = createPulsarProvider({ url: "ws://127.0.0.1:8080" });
 * await provider.connect();
 */
export function createPulsarProvider(
  input: PulsarConfigInput = {},
  options: PulsarProviderOptions = {},
): PulsarProvider {
  const config = parsePulsarConfig(input);
  const logger = providerLogger("pulsar", options.logger);
  const counters = emptyDurabilityCounters();
  const transport =
    options.transport?.(config) ??
    new WsTransport({
      url: config.url,
      tenant: config.tenant,
      namespace: config.namespace,
      connectTimeoutMs: config.connectTimeoutMs,
      pingIntervalMs: config.pingIntervalMs,
    });
  const rest = new PulsarRest({
    adminUrl: config.adminUrl,
    tenant: config.tenant,
    namespace: config.namespace,
    timeoutMs: config.publishTimeoutMs,
  });
  const topics = new Topics(rest);
  const producers = new Producers(transport, config.publishTimeoutMs, (topic) => topics.forget(topic));
  const subscriptions = new Set<PulsarSubscription>();
  const known = new KnownDestinations();
  const targetOf = destinationMemo(resolveDestination);

  const admin = new PulsarAdmin({
    config,
    rest,
    transport,
    producers,
    topics,
    destinations: () => known.list(),
    inFlight: (destination, subscription) => {
      let total = 0;
      for (const s of subscriptions) {
        if (s.destination === destination && (subscription === undefined || s.name === subscription))
          total += s.inFlight();
      }
      return total;
    },
  });

  const provider: UnguardedProvider<PulsarProvider> = {
    name: "pulsar",
    config,
    transportKind: transport.kind,
    capabilities: Object.freeze({ ...PULSAR_CAPABILITIES, maxMessageBytes: config.maxMessageBytes }),
    admin,

    async connect() {
      await rest.checkNamespace();
      Object.assign(counters, emptyDurabilityCounters());
    },

    async close() {
      await Promise.allSettled([...subscriptions].map((s) => s.stop()));
      producers.closeAll();
      transport.closeAll();
    },

    async publish(destination, message) {
      const target = targetOf(destination);
      const encoded = encodeMessage(destination, message, config.maxMessageBytes);
      counters.published += 1;
      if (target.kind === "queue") {
        known.remember(destination, "queue");
        // A queue keeps what is published before its first consumer: its subscription must exist.
        if (!topics.isQueueReady(target.topic)) await topics.ensureQueue(target.topic);
      } else known.remember(destination, "topic");
      await producers.send(
        target.topic,
        encoded.delayMs > 0
          ? { payload: encoded.payload, deliverAfterMs: encoded.delayMs }
          : { payload: encoded.payload },
      );
      counters.confirmed += 1;
      return { id: encoded.id };
    },

    async subscribe(destination, handler, options) {
      const route = routeOf(destination, options.subscription);
      if (route.kind === "queue") await topics.ensureQueue(route.topic);
      else {
        await topics.ensureTopicSubscription(route.topic, route.pulsarSubscription);
        await topics.ensureTopicSubscription(route.retryTopic, route.pulsarSubscription);
      }
      await topics.ensureDeadLetterTopic(route.deadLetterTopic);
      known.remember(destination, route.kind, options.subscription);
      const plan = planConsumption(handler, options);
      const subscription = new PulsarSubscription(
        { config, transport, producers, topics, counters, logger, onStop: (s) => subscriptions.delete(s) },
        route,
        plan,
      );
      subscriptions.add(subscription);
      // On failure the runtime has stopped the subscription, links closed and forgotten.
      await subscription.runtime.start();
      return subscription.runtime;
    },

    counters() {
      return { ...counters };
    },

    connectionCount() {
      return transport.openedCount();
    },

    async destroy(destination: string) {
      const target = resolveDestination(destination);
      // Close this instance's consumers of the destination first: a consumer whose topic is
      // force-deleted under it would resubscribe, and subscribing creates the topic again.
      await Promise.allSettled(
        [...subscriptions].filter((s) => s.destination === destination).map((s) => s.stop()),
      );
      const doomed = new Set<string>([target.topic, routeOf(destination, "x").deadLetterTopic]);
      if (target.kind === "topic") {
        // Every subscription's retry and dead-letter topics, whoever subscribed: `<topic>--<sub>-retry|-dlq`
        // (a destination's own topic never ends in -retry or -dlq).
        for (const name of await rest.listTopics()) {
          if (name.startsWith(`${target.topic}--`) && /-(retry|dlq)$/.test(name)) doomed.add(name);
        }
      }
      for (const topic of doomed) {
        await producers.forget(topic);
        topics.forget(topic);
        await rest.deleteTopic(topic).catch(() => false);
      }
    },
  };
  return guardProvider(provider, { factory: "createPulsarProvider()", guarded: ["destroy"] });
}
