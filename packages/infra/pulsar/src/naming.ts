import { ProviderError, parseDestination } from "@factflow/protocols";

/** The subscription every consumer of a Factflow queue shares (competing consumers). */
export const QUEUE_SUBSCRIPTION = "factflow";
/** The retained subscription of every dead-letter topic: it keeps dead letters until browsed away. */
export const DEAD_LETTER_SUBSCRIPTION = "factflow-dlq";

/** Suffixes of the topics the provider keeps besides the ones it maps destinations to. */
const DLQ_SUFFIX = "-dlq";
const RETRY_SUFFIX = "-retry";

/** Where one protocol destination lives in Pulsar. */
export interface PulsarTarget {
  readonly kind: "queue" | "topic";
  readonly destination: string;
  /** Local topic name within the tenant/namespace, e.g. `q.orders.new`. */
  readonly topic: string;
}

/** Where one subscription's deliveries, retries and dead letters live. */
export interface PulsarRoute {
  readonly kind: "queue" | "topic";
  readonly destination: string;
  /** The Factflow subscription name. */
  readonly subscription: string;
  /** The topic the subscription consumes. */
  readonly topic: string;
  /** The Pulsar subscription on `topic`: `factflow` for queues, the escaped name for topics. */
  readonly pulsarSubscription: string;
  /**
   * Where retry and redrive copies go: the queue's own topic, or a topic subscription's retry topic
   * (`<topic>--<sub>-retry`, consumed by that subscription only, like the Pulsar client's retry
   * letter topic), so a copy never reaches the other subscriptions of a topic.
   */
  readonly retryTopic: string;
  /** The dead-letter topic: `<topic>-dlq`, or `<topic>--<sub>-dlq` for a topic subscription. */
  readonly deadLetterTopic: string;
}

const KEEP = /[A-Za-z0-9-]/;

/** `_hh` for every UTF-8 byte of `ch`. */
function hexEscape(ch: string): string {
  let out = "";
  for (const byte of Buffer.from(ch, "utf8")) out += `_${byte.toString(16).padStart(2, "0")}`;
  return out;
}

/**
 * Escapes a destination name into the characters Pulsar topic names and URL paths carry without
 * quoting (`[A-Za-z0-9._-]`): `/` → `.`, `_` → `__`, every other character outside
 * `[A-Za-z0-9-]` → `_hh` per UTF-8 byte. Reading left to right, `_` is always followed by `_` or two
 * hex digits, so the mapping is injective. A result that would end in `-dlq` or `-retry`, or contain
 * Pulsar's reserved `-partition-`, gets that `-` escaped as `_2d`, so the provider's own suffixes
 * can never be produced by a destination name.
 */
export function escapeName(name: string): string {
  let out = "";
  for (const ch of name) {
    if (ch === "/") out += ".";
    else if (ch === "_") out += "__";
    else if (KEEP.test(ch)) out += ch;
    else out += hexEscape(ch);
  }
  out = out.replaceAll("-partition-", "_2dpartition-");
  for (const suffix of [DLQ_SUFFIX, RETRY_SUFFIX]) {
    if (out.endsWith(suffix)) out = `${out.slice(0, -suffix.length)}_2d${suffix.slice(1)}`;
  }
  return out;
}

/** A subscription name as Pulsar carries it: like {@link escapeName}, with `-` escaped too (no `-` at all). */
export function escapeSubscription(name: string): string {
  return escapeName(name).replaceAll("-", "_2d");
}

function invalid(message: string): ProviderError {
  return new ProviderError("pulsar", "invalid-input", message, { code: "invalid_destination" });
}

/** Maps `/queue/a/b` → topic `q.a.b`, `/topic/x` → `t.x`. Throws `invalid_destination` otherwise. */
export function resolveDestination(destination: string): PulsarTarget {
  const parsed = parseDestination(destination);
  if ("error" in parsed) throw invalid(parsed.error);
  const prefix = parsed.kind === "queue" ? "q." : "t.";
  return { kind: parsed.kind, destination, topic: `${prefix}${escapeName(parsed.name)}` };
}

/** The dead-letter topic of a queue. */
export function queueDeadLetterTopic(queueTopic: string): string {
  return `${queueTopic}${DLQ_SUFFIX}`;
}

/** The route of one subscription (for a queue, the subscription name does not change the topics). */
export function routeOf(destination: string, subscription: string): PulsarRoute {
  const target = resolveDestination(destination);
  if (target.kind === "queue") {
    return {
      kind: "queue",
      destination,
      subscription,
      topic: target.topic,
      pulsarSubscription: QUEUE_SUBSCRIPTION,
      retryTopic: target.topic,
      deadLetterTopic: queueDeadLetterTopic(target.topic),
    };
  }
  const sub = escapeSubscription(subscription);
  return {
    kind: "topic",
    destination,
    subscription,
    topic: target.topic,
    pulsarSubscription: sub,
    retryTopic: `${target.topic}--${sub}${RETRY_SUFFIX}`,
    deadLetterTopic: `${target.topic}--${sub}${DLQ_SUFFIX}`,
  };
}
