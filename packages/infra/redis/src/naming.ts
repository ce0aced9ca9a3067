import { ProviderError } from "@factflow/protocols";
import { checkDestination } from "@factflow/provider-kit";

/** The consumer group every lane is read with: one group per lane, its consumers compete. */
export const GROUP = "factflow";

/**
 * The Redis keys of one lane: a stream consumed by one consumer group. A queue is one lane; each
 * subscription of a topic is a lane of its own (a publish to the topic adds the entry to every
 * subscription's lane), so retries and dead letters of one subscription never touch another.
 *
 * Every key of a destination shares one hash tag (`{q:<name>}` or `{t:<name>}`), so the Lua scripts
 * that move an entry between them stay in one slot on Redis Cluster too.
 */
export interface LaneKeys {
  /** The protocol destination. */
  readonly destination: string;
  readonly kind: "queue" | "topic";
  /** Topic subscription name; undefined for a queue. */
  readonly subscription: string | undefined;
  /** The stream consumed. */
  readonly stream: string;
  /** Sorted set of delayed entries (retries, `delayMs` publishes), scored by due time. */
  readonly delayed: string;
  /** The dead-letter stream (`<queue>.dlq`). */
  readonly dlq: string;
  /** Sorted set of live consumers, scored by their last heartbeat. */
  readonly consumers: string;
  /** For a topic: the set naming its subscriptions. */
  readonly subscriptions: string | undefined;
}

/** Subscription names are free text; escape them so `:` and braces cannot break the key layout. */
export function escapeSubscription(subscription: string): string {
  return encodeURIComponent(subscription).replace(
    /[.*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** The hash-tagged base key of a destination: `<prefix>{q:<name>}` or `<prefix>{t:<name>}`. */
export function baseKey(prefix: string, kind: "queue" | "topic", name: string): string {
  return `${prefix}{${kind === "queue" ? "q" : "t"}:${name}}`;
}

/** The key of a topic's subscription set. */
export function subscriptionSetKey(prefix: string, topicName: string): string {
  return `${baseKey(prefix, "topic", topicName)}:subs`;
}

/** The prefix a topic subscription's lane key starts with; the escaped subscription name follows. */
export function topicLanePrefix(prefix: string, topicName: string): string {
  return `${baseKey(prefix, "topic", topicName)}:s:`;
}

function keysOf(stream: string) {
  return { stream, delayed: `${stream}:delayed`, dlq: `${stream}:dlq`, consumers: `${stream}:consumers` };
}

/** The lane of a queue, or of one subscription of a topic. */
export function laneFor(prefix: string, destination: string, subscription?: string): LaneKeys {
  const { kind, name } = checkDestination("redis", destination);
  if (kind === "queue") {
    return {
      destination,
      kind,
      subscription: undefined,
      subscriptions: undefined,
      ...keysOf(baseKey(prefix, "queue", name)),
    };
  }
  if (subscription === undefined) {
    throw new ProviderError(
      "redis",
      "invalid-input",
      `"${destination}" is a topic: name the subscription, its messages and dead letters are kept per subscription`,
      { code: "invalid_argument", retryable: false },
    );
  }
  return {
    destination,
    kind,
    subscription,
    subscriptions: subscriptionSetKey(prefix, name),
    ...keysOf(`${topicLanePrefix(prefix, name)}${escapeSubscription(subscription)}`),
  };
}
