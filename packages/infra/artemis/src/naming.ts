import { type Destination, deadLetterQueueOf, ProviderError, parseDestination } from "@factflow/protocols";

/**
 * How Factflow destinations map onto Artemis:
 *
 * | Factflow                         | Artemis                                                        |
 * |----------------------------------|----------------------------------------------------------------|
 * | `/queue/<name>`                  | anycast address `<name>` with one anycast queue `<name>`       |
 * | `/topic/<name>`                  | multicast address `<name>`                                     |
 * | subscription `<sub>` of a topic  | multicast queue `<name>@<sub>` on it (shared by its consumers) |
 * | dead letters of a queue          | anycast queue `<name>.dlq`                                     |
 * | dead letters of a subscription   | anycast queue `<name>@<sub>.dlq`                               |
 *
 * `@` is outside Factflow's name alphabet, so a subscription queue can never collide with a queue.
 * Consumers of a subscription subscribe to the fully qualified `<name>::<name>@<sub>`, which creates
 * the multicast queue on first use, and a redrive sends to that same FQQN so that only the one
 * subscription sees it.
 */
export interface ArtemisTarget {
  readonly kind: "queue" | "topic";
  /** The Factflow destination, e.g. `/queue/exec-1/parse`. */
  readonly destination: Destination;
  /** The Artemis address: the destination without its kind prefix. */
  readonly address: string;
}

/** Separates a topic from a subscription in a subscription queue's name. */
export const SUBSCRIPTION_SEPARATOR = "@";
/** Artemis' fully-qualified-queue-name separator. */
const FQQN = "::";
const SUBSCRIPTION_NAME = /^[A-Za-z0-9_.:-]{1,200}$/;

function invalid(message: string): ProviderError {
  return new ProviderError("artemis", "invalid-input", message, { code: "invalid_destination" });
}

/** Parses and validates a Factflow destination; throws `invalid_destination` with the fix. */
export function resolveDestination(destination: string): ArtemisTarget {
  const parsed = typeof destination === "string" ? parseDestination(destination) : { error: "" };
  if ("error" in parsed) {
    throw invalid(
      `${parsed.error || `destination ${String(destination)} must be a string`}; e.g. "/queue/orders" or "/topic/config-reloaded"`,
    );
  }
  if (parsed.name.includes(FQQN)) {
    throw invalid(
      `destination "${destination}" contains "::", which Artemis reads as address::queue; use a single ":"`,
    );
  }
  return { kind: parsed.kind, destination: destination as Destination, address: parsed.name };
}

/** Checks a subscription name before it becomes part of an Artemis queue name. */
export function checkSubscriptionName(destination: string, subscription: string): void {
  if (
    typeof subscription !== "string" ||
    !SUBSCRIPTION_NAME.test(subscription) ||
    subscription.includes(FQQN)
  ) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      `subscription name "${String(subscription)}" for "${destination}" must be 1 to 200 of [A-Za-z0-9_.:-] without "::"`,
      { code: "invalid_argument" },
    );
  }
}

/** The multicast queue holding one topic subscription's copies. */
export function subscriptionQueueName(topic: ArtemisTarget, subscription: string): string {
  return `${topic.address}${SUBSCRIPTION_SEPARATOR}${subscription}`;
}

/** The Artemis queue a subscription consumes: the queue itself, or the topic subscription's queue. */
export function consumedQueueName(target: ArtemisTarget, subscription: string): string {
  return target.kind === "queue" ? target.address : subscriptionQueueName(target, subscription);
}

/** What a SUBSCRIBE frame names: the queue, or `address::subscription-queue` for a topic. */
export function subscribeDestination(target: ArtemisTarget, subscription: string): string {
  return target.kind === "queue"
    ? target.address
    : `${target.address}${FQQN}${subscriptionQueueName(target, subscription)}`;
}

/** The dead-letter queue of a queue (`<name>.dlq`) or of a topic subscription (`<name>@<sub>.dlq`). */
export function deadLetterQueueName(target: ArtemisTarget, subscription?: string): string {
  if (target.kind === "queue") return deadLetterQueueOf(target.address);
  if (subscription === undefined) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      `dead letters of topic "${target.destination}" are kept per subscription: pass { subscription }`,
      { code: "invalid_argument" },
    );
  }
  return deadLetterQueueOf(subscriptionQueueName(target, subscription));
}

/** Internal queues the admin API never reports as Factflow destinations. */
function isInternal(queue: string): boolean {
  return (
    queue.endsWith(".dlq") ||
    queue === "DLQ" ||
    queue.startsWith("DLQ.") ||
    queue === "ExpiryQueue" ||
    queue.startsWith("activemq.") ||
    queue.startsWith("factflow.admin.") ||
    queue.startsWith("$")
  );
}

/** Maps an anycast queue name back to `/queue/<name>`, or undefined when it is not a Factflow queue. */
export function queueFromArtemis(queue: string): Destination | undefined {
  if (isInternal(queue) || queue.includes(SUBSCRIPTION_SEPARATOR)) return undefined;
  const destination = `/queue/${queue}`;
  return "error" in parseDestination(destination) ? undefined : (destination as Destination);
}

/** Maps a multicast subscription queue back to its topic and subscription name. */
export function subscriptionFromArtemis(
  queue: string,
): { readonly topic: Destination; readonly subscription: string } | undefined {
  if (isInternal(queue)) return undefined;
  const at = queue.lastIndexOf(SUBSCRIPTION_SEPARATOR);
  if (at <= 0) return undefined;
  const topic = `/topic/${queue.slice(0, at)}`;
  const subscription = queue.slice(at + 1);
  if ("error" in parseDestination(topic) || !SUBSCRIPTION_NAME.test(subscription)) return undefined;
  return { topic: topic as Destination, subscription };
}
