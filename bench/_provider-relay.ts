/**
 * The "provider" mode of the broker relay benches (`bench/rabbitmq.ts`, `artemis.ts`, `pulsar.ts`,
 * `redis.ts`): the 3-hop relay through a Factflow provider, each hop a subscription whose handler
 * publishes onward. The broker benches differ only in how they make the provider and clean up.
 */
import type { HandlerResult, QueueProtocol } from "@factflow/protocols";
import type { RelayMode } from "./_relay-harness.js";

/** Header with the publish time of a hop, in epoch ms (every relay mode sets and reads it). */
export const SENT_HEADER = "x-bench-sent";

/** How the provider mode makes its provider and removes what the relay left on the broker. */
export interface ProviderRelayTarget<P extends QueueProtocol> {
  /** A fresh, unconnected provider for one relay. */
  create(url: string): P;
  /** After the provider has closed: deletes the relay's queues (`queues` are the bare names). */
  cleanup?(url: string, provider: P, queues: readonly string[]): Promise<void>;
}

/** The provider relay mode over `target`, each hop holding `prefetch` deliveries at once. */
export function providerRelayMode<P extends QueueProtocol>(
  target: ProviderRelayTarget<P>,
  prefetch: number,
): RelayMode {
  return {
    name: "provider",
    async start(url, queues, sink) {
      const provider = target.create(url);
      await provider.connect();
      const destinations = queues.map((q) => `/queue/${q}`);
      for (let i = 0; i < destinations.length; i++) {
        const next = destinations[i + 1];
        await provider.subscribe(
          destinations[i] as string,
          async (delivery): Promise<HandlerResult> => {
            sink.hop(Date.now() - Number(delivery.message.headers[SENT_HEADER]));
            if (next === undefined) {
              sink.arrived();
              return "ACKNOWLEDGED";
            }
            await provider.publish(next, {
              body: delivery.message.body,
              headers: { [SENT_HEADER]: String(Date.now()) },
            });
            return "ACKNOWLEDGED";
          },
          { subscription: `hop-${i}`, prefetch, concurrency: prefetch },
        );
      }
      return {
        inject: (index) =>
          provider
            .publish(destinations[0] as string, {
              body: { index },
              headers: { [SENT_HEADER]: String(Date.now()) },
            })
            .then(() => {}),
        async close() {
          await provider.close();
          await target.cleanup?.(url, provider, queues);
        },
      };
    },
  };
}
