import { errorText, type ProviderCapabilities, ProviderError, type QueueProtocol } from "@factflow/protocols";
import {
  checkDestination,
  compactHeaders,
  emptyDurabilityCounters,
  envelopeFromHeaders,
  guardProvider,
  prepareOutbound,
  type SubscriptionPort,
  SubscriptionRuntime,
  type UnguardedProvider,
} from "@factflow/provider-kit";
import { createAdmin } from "./admin.js";
import type { Consumer, Stored, WalkthroughBroker } from "./broker.js";
import { NAME, queueKey } from "./naming.js";

const CAPABILITIES: ProviderCapabilities = Object.freeze({
  priorities: false,
  retryDelay: "exponential",
  delayGranularityMs: 10,
  fifo: true,
  messageGroups: true,
  orderedGroups: true,
  // The broker object outlives every provider built on it, as a broker process outlives its clients.
  durable: true,
  maxMessageBytes: 256 * 1024,
});

/** A stored message as an envelope (restoring the headers `compactHeaders` left implicit), or why it is not one. */
function decode(message: Stored) {
  try {
    return envelopeFromHeaders({ ...message.headers }, JSON.parse(message.body));
  } catch (error) {
    return { error: errorText(error), headers: message.headers };
  }
}

/** A provider over an in-process broker, on the kit's `SubscriptionRuntime`. */
export function createWalkthroughProvider(broker: WalkthroughBroker): QueueProtocol {
  const counters = emptyDurabilityCounters();
  const subscriptions = new Set<SubscriptionRuntime<Stored>>();

  const provider: UnguardedProvider = {
    name: NAME,
    capabilities: CAPABILITIES,
    admin: createAdmin(broker),
    async connect() {
      Object.assign(counters, emptyDurabilityCounters());
    },
    async close() {
      await Promise.all([...subscriptions].map((s) => s.unsubscribe()));
    },
    async publish(destination, message) {
      const { kind } = checkDestination(NAME, destination);
      const prepared = prepareOutbound(NAME, destination, message, {
        maxBytes: CAPABILITIES.maxMessageBytes,
      });
      counters.published += 1;
      // A topic sends one copy to each of its subscriptions' queues.
      const keys =
        kind === "queue"
          ? [destination]
          : [...broker.subscriptionsOf(destination)].map((s) => queueKey(destination, s));
      for (const key of keys) {
        const stored = { headers: compactHeaders(prepared), body: prepared.bodyJson, redelivered: false };
        broker.queue(key).send(stored, prepared.delayMs);
      }
      counters.confirmed += 1;
      return { id: prepared.id };
    },
    async subscribe(destination, handler, options) {
      const key = queueKey(destination, options.subscription);
      if (key !== destination) broker.subscriptionsOf(destination).add(options.subscription);
      const queue = broker.queue(key);
      let consumer: Consumer | undefined;
      // The broker's part of the subscription; the runtime does the rest.
      const port: SubscriptionPort<Stored> = {
        // The consumer's prefetch is the flow control; ordered subscriptions get the queue alone.
        async receive(deliver) {
          consumer = queue.consume(runtime.prefetch, options.ordering === "fifo", (m) =>
            deliver(m, m.redelivered),
          );
        },
        async stopReceiving() {
          consumer?.cancel();
        },
        decode,
        isCurrent: (message) => consumer?.held.has(message) === true,
        ack: (message) => consumer?.ack(message) === true,
        handBack: (message) => consumer?.nack(message) === true,
        // Stored at once, so confirmed at once; a networked broker awaits its receipt here.
        async publishCopy(message, copy) {
          const stored = { headers: copy.headers, body: message.body, redelivered: false };
          if (copy.kind === "dead") queue.dead.push(stored);
          else queue.send(stored, copy.verdict.delayMs);
          return "confirmed";
        },
        classifyError: (error, operation) =>
          new ProviderError(NAME, "unknown", `${operation} failed: ${errorText(error)}`, { cause: error }),
        // Leaving the queue gives back whatever is still held.
        async close() {
          consumer?.close();
        },
      };
      const runtime = new SubscriptionRuntime({
        provider: NAME,
        destination,
        handler,
        options,
        port,
        counters,
        onStop: () => subscriptions.delete(runtime),
      });
      subscriptions.add(runtime);
      await runtime.start();
      return runtime;
    },
    counters: () => ({ ...counters }),
  };
  return guardProvider(provider, { factory: "createWalkthroughProvider()" });
}
