import { join } from "node:path";
import type { Logger, QueueProtocol } from "@factflow/protocols";
import { DEFAULT_LEASE_MS } from "./cluster-lease.js";
import type { Settings } from "./settings.js";

/** What the provider takes from the server besides its settings. */
export interface ProviderOptions {
  /**
   * The cluster lease (`FACTFLOW_CLUSTER_LEASE_MS`). On Redis a dead server's deliveries move to
   * another consumer only after the visibility timeout, so it follows the lease: a server taken over
   * after the lease has its pending entries claimed at about the same time. @default 10000
   */
  readonly leaseMs?: number;
  /**
   * This server's cluster node id. On Redis it names the consumers, so a server that takes this one
   * over claims their pending entries at once (`claimFromNode`).
   */
  readonly nodeId?: string;
}

/** The Redis timing a lease asks for: visibility timeout = lease, a reclaim sweep every quarter of it. */
export function redisTimingOf(leaseMs: number): { visibilityTimeoutMs: number; reclaimIntervalMs: number } {
  return { visibilityTimeoutMs: leaseMs, reclaimIntervalMs: Math.max(250, Math.floor(leaseMs / 4)) };
}

/**
 * Builds the (unconnected) queue provider the settings choose. Providers are imported only when
 * chosen, so a server on RabbitMQ never loads the STOMP client and vice versa.
 */
export async function createProvider(
  settings: Settings,
  logger: Logger,
  options: ProviderOptions = {},
): Promise<QueueProtocol> {
  const providerLogger = logger.child({ component: `provider-${settings.provider}` });
  switch (settings.provider) {
    case "embedded": {
      const { createEmbeddedProvider } = await import("@factflow/infra-embedded");
      return settings.embedded_mode === "memory"
        ? createEmbeddedProvider({ mode: "memory" }, { logger: providerLogger })
        : createEmbeddedProvider(
            { mode: "file", dataDir: join(settings.data_dir, "queue") },
            { logger: providerLogger },
          );
    }
    case "rabbitmq": {
      const { createRabbitMqProvider } = await import("@factflow/infra-rabbitmq");
      return createRabbitMqProvider(
        settings.rabbitmq_url === undefined ? {} : { url: settings.rabbitmq_url },
        {
          logger: providerLogger,
        },
      );
    }
    case "artemis": {
      const { createArtemisProvider } = await import("@factflow/infra-artemis");
      return createArtemisProvider(
        {
          ...(settings.artemis_url === undefined ? {} : { url: settings.artemis_url }),
          ...(settings.artemis_user === undefined ? {} : { login: settings.artemis_user }),
          ...(settings.artemis_password === undefined ? {} : { passcode: settings.artemis_password }),
        },
        { logger: providerLogger },
      );
    }
    case "pulsar": {
      const { createPulsarProvider } = await import("@factflow/infra-pulsar");
      return createPulsarProvider(
        {
          ...(settings.pulsar_url === undefined ? {} : { url: settings.pulsar_url }),
          ...(settings.pulsar_admin_url === undefined ? {} : { adminUrl: settings.pulsar_admin_url }),
          ...(settings.pulsar_tenant === undefined ? {} : { tenant: settings.pulsar_tenant }),
          ...(settings.pulsar_namespace === undefined ? {} : { namespace: settings.pulsar_namespace }),
        },
        { logger: providerLogger },
      );
    }
    case "redis": {
      const { createRedisProvider } = await import("@factflow/infra-redis");
      return createRedisProvider(
        {
          ...(settings.redis_url === undefined ? {} : { url: settings.redis_url }),
          ...(settings.redis_key_prefix === undefined ? {} : { keyPrefix: settings.redis_key_prefix }),
          ...redisTimingOf(options.leaseMs ?? DEFAULT_LEASE_MS),
        },
        { logger: providerLogger, ...(options.nodeId === undefined ? {} : { node: options.nodeId }) },
      );
    }
  }
}
