import type { Logger, ProviderCapabilities, QueueProtocol } from "@factflow/protocols";
import {
  emptyDurabilityCounters,
  guardProvider,
  providerLogger,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import { ArtemisAdmin } from "./admin.js";
import { classifyArtemisError } from "./classify-error.js";
import { type ArtemisConfig, type ArtemisConfigInput, endpointOf, parseArtemisConfig } from "./config.js";
import { encodeMessage, sendHeaders } from "./envelope-codec.js";
import { ManagementClient } from "./management.js";
import { checkSubscriptionName, resolveDestination } from "./naming.js";
import { ALL_CHECKS, type SettlementChecks, SettlementGuard } from "./settlement-guard.js";
import { StompLink } from "./stomp-link.js";
import { ArtemisSubscription } from "./subscription.js";

/** Options besides the config. */
export interface ArtemisProviderOptions {
  /** @default silentLogger */
  readonly logger?: Logger;
  /**
   * The settlement guard's checks. Leave them all on: switching one off exists only so that tests
   * can show what it prevents (an ERROR frame and a dropped connection). @default all true
   */
  readonly settlementChecks?: Partial<SettlementChecks>;
  /**
   * Called after a retry, dead-letter or redelivery copy has its RECEIPT and before the original is
   * acknowledged: the window in which a lost connection must not lose or destroy the message.
   * Instrumentation for tests and tracing; keep it fast.
   */
  readonly afterCopyConfirmed?: (info: {
    readonly destination: string;
    readonly what: string;
  }) => void | Promise<void>;
}

/** The Artemis provider: the `QueueProtocol` plus tooling hooks. */
export interface ArtemisProvider extends QueueProtocol {
  readonly config: ArtemisConfig;
  /** STOMP connections established so far (1 after `connect`, +1 per reconnect). */
  connectionCount(): number;
  /** Cuts the STOMP connection without DISCONNECT, as a network failure would (tests and tooling). */
  dropConnection(): void;
  /** The live subscriptions, each with `restart()` to replace its broker consumer. */
  subscriptions(): readonly ArtemisSubscription[];
  /** Deletes a destination's queues and dead letters on the broker (messages included). For tests and tooling. */
  destroy(destination: string): Promise<void>;
}

/** What Artemis over STOMP can do, as the conformance suite reads it. */
export const ARTEMIS_CAPABILITIES: ProviderCapabilities = Object.freeze({
  priorities: true,
  retryDelay: "exponential",
  // The broker's scheduled-delivery timer fires to the millisecond; the hop adds a few ms.
  delayGranularityMs: 20,
  fifo: true,
  messageGroups: true,
  // An exclusive queue (one active consumer across every server) + the kit's group lanes.
  orderedGroups: true,
  durable: true,
  maxMessageBytes: 10_485_760,
  // messageCount holds waiting, scheduled and delivering messages of every consumer; the stats
  // leave out only stranded deliveries, which no consumer holds (docs/deployment.md).
  brokerWideStats: true,
});

/**
 * Creates an ActiveMQ Artemis provider speaking STOMP 1.2 over TCP. Nothing connects until
 * `connect()`.
 *
 * @example
 * const provider = createArtemisProvider({ url: process.env.ARTEMIS_STOMP_URL });
 * await provider.connect();
 */
export function createArtemisProvider(
  input: ArtemisConfigInput = {},
  options: ArtemisProviderOptions = {},
): ArtemisProvider {
  const config = parseArtemisConfig(input);
  const logger = providerLogger("artemis", options.logger);
  const counters = emptyDurabilityCounters();
  const link = new StompLink(endpointOf(config), config, logger, "factflow");
  const management = new ManagementClient(link, config);
  const guard = new SettlementGuard({ ...ALL_CHECKS, ...options.settlementChecks });
  const live = new Set<ArtemisSubscription>();

  link.onConnected((generation) => {
    if (generation === 1) return;
    for (const subscription of live) {
      subscription.attach(false).catch((error: unknown) =>
        logger.warn("artemis: resubscribe after reconnect failed; the next reconnect retries", {
          destination: subscription.target.destination,
          error: error instanceof Error ? error.message : String(error),
        }),
      );
    }
  });

  const admin = new ArtemisAdmin({
    link,
    management,
    config,
    buffered: (queue) => {
      let total = 0;
      for (const subscription of live)
        if (subscription.queueName === queue) total += subscription.runtime.waiting;
      return total;
    },
  });

  // The kit's guard adds the lifecycle (connect once, close once, no use before connect or after
  // close) and validates subscribe options against the capabilities before they reach this object.
  const provider: UnguardedProvider<ArtemisProvider> = {
    name: "artemis",
    config,
    capabilities: Object.freeze({ ...ARTEMIS_CAPABILITIES, maxMessageBytes: config.maxMessageBytes }),
    admin,

    async connect() {
      try {
        await link.connect();
      } catch (error) {
        throw classifyArtemisError(error, `connect to ${config.url.replace(/\/\/[^@/]*@/, "//")}`);
      }
      Object.assign(counters, emptyDurabilityCounters());
    },

    async close() {
      await Promise.allSettled([...live].map((subscription) => subscription.runtime.unsubscribe()));
      management.abandon();
      // Bounded: close must stay prompt even on a stalled connection.
      await Promise.race([
        management.dispose(),
        new Promise((resolve) => setTimeout(resolve, 1_000).unref()),
      ]);
      await link.close();
    },

    async publish(destination, message) {
      const target = resolveDestination(destination);
      const encoded = encodeMessage(destination, message, config.maxMessageBytes);
      counters.published += 1;
      await link.send(
        target.address,
        sendHeaders(encoded, target.kind === "queue" ? "ANYCAST" : "MULTICAST"),
        encoded.body,
        `publish to "${destination}"`,
      );
      counters.confirmed += 1;
      return { id: encoded.id };
    },

    async subscribe(destination, handler, subscribeOptions) {
      const target = resolveDestination(destination);
      checkSubscriptionName(destination, subscribeOptions.subscription);
      const subscription = new ArtemisSubscription(target, handler, subscribeOptions, {
        link,
        guard,
        counters,
        logger,
        bytesPerMessage: config.prefetchBytesPerMessage,
        onStop: (stopped) => live.delete(stopped),
        ...(options.afterCopyConfirmed === undefined
          ? {}
          : { afterCopyConfirmed: options.afterCopyConfirmed }),
      });
      try {
        // FIFO, with or without groups: an exclusive queue (a single active consumer across every
        // server); the kit's runtime takes one delivery at a time, or the kit's lanes one per group.
        if (subscribeOptions.ordering === "fifo") {
          const routing = target.kind === "queue" ? "ANYCAST" : "MULTICAST";
          await management.ensureExclusive(subscription.queueName, target.address, routing);
        }
        live.add(subscription);
        await subscription.runtime.start();
      } catch (error) {
        live.delete(subscription);
        throw classifyArtemisError(error, `subscribe to "${destination}"`);
      }
      return subscription.runtime;
    },

    counters: () => ({ ...counters }),
    connectionCount: () => link.generation,
    dropConnection: () => link.forceDisconnect(),
    subscriptions: () => [...live],
    destroy: (destination) => admin.destroy(destination),
  };
  return guardProvider(provider, { factory: "createArtemisProvider()", guarded: ["destroy"] });
}
