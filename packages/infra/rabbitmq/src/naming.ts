import { ProviderError, parseDestination } from "@factflow/protocols";

/** RabbitMQ's limit on queue and exchange names, in bytes. */
const MAX_AMQP_NAME = 255;
const AMQP_NAME = /^[a-zA-Z0-9_\-.:]+$/;

/** The broker objects one protocol destination maps to. */
export type AmqpTarget =
  | { readonly kind: "queue"; readonly destination: string; readonly queue: string }
  | { readonly kind: "topic"; readonly destination: string; readonly exchange: string };

/**
 * Escapes a destination name (segments of `[A-Za-z0-9_.:-]` joined by `/`) into the AMQP charset.
 * `:` is the escape character: `:` → `::` and `/` → `:.`; every other character stands for itself.
 * Reading left to right, `:` is always followed by `:` or `.`, so the mapping is injective, and
 * the internal suffixes below (`:retry.`, `:sub.`, `:dlq`, `:x`) — a `:` followed by a letter —
 * can never be produced by any destination name, so internal names never collide with user ones.
 */
export function escapeName(name: string): string {
  let out = "";
  for (const ch of name) {
    if (ch === ":") out += "::";
    else if (ch === "/") out += ":.";
    else out += ch;
  }
  return out;
}

function invalid(message: string): ProviderError {
  return new ProviderError("rabbitmq", "invalid-input", message, { code: "invalid_destination" });
}

/** Throws a clear error unless `name` is usable as an AMQP queue or exchange name. */
export function assertAmqpName(name: string, destination: string): string {
  if (!AMQP_NAME.test(name)) {
    throw invalid(
      `destination "${destination}" maps to AMQP name "${name}", which does not match [a-zA-Z0-9_\\-.:]+`,
    );
  }
  if (Buffer.byteLength(name) > MAX_AMQP_NAME) {
    throw invalid(
      `destination "${destination}" maps to an AMQP name of ${Buffer.byteLength(name)} bytes; RabbitMQ allows ${MAX_AMQP_NAME}. Use a shorter name (escaping doubles ":" and turns "/" into ":.")`,
    );
  }
  if (name.startsWith("amq.")) {
    throw invalid(
      `destination "${destination}" maps to "${name}"; names starting with "amq." are reserved by RabbitMQ`,
    );
  }
  return name;
}

/**
 * Maps a protocol destination to its AMQP object: `/queue/a/b` → durable queue `a:.b`,
 * `/topic/x` → fanout exchange `x:x`. Throws `invalid_destination` with the reason otherwise.
 */
export function resolveDestination(destination: string): AmqpTarget {
  const parsed = parseDestination(destination);
  if ("error" in parsed) throw invalid(parsed.error);
  const escaped = escapeName(parsed.name);
  if (parsed.kind === "queue") {
    // Leave room for the longest internal suffix (":retry.<ms>").
    assertAmqpName(`${escaped}:retry.86400000`, destination);
    return { kind: "queue", destination, queue: escaped };
  }
  return { kind: "topic", destination, exchange: assertAmqpName(`${escaped}:x`, destination) };
}

/** The queue holding one subscription's copy of a topic: `<topic>:sub.<subscription>`. */
export function topicSubscriptionQueue(destination: string, subscription: string): string {
  const parsed = parseDestination(destination);
  if ("error" in parsed) throw invalid(parsed.error);
  if (subscription.length === 0 || !/^[A-Za-z0-9_.:/-]+$/.test(subscription)) {
    throw invalid(
      `subscription "${subscription}" must be non-empty and use only letters, digits, "_", ".", ":", "-" and "/"`,
    );
  }
  return assertAmqpName(`${escapeName(parsed.name)}:sub.${escapeName(subscription)}`, destination);
}

/**
 * The dead-letter queue of a source queue. For a point-to-point queue it is the queue of the
 * protocol destination `<queue>.dlq` (so `/queue/a.dlq` can be consumed like any queue); for a
 * topic subscription it is `<subscription queue>:dlq`.
 */
export function deadLetterQueueName(sourceQueue: string, kind: "queue" | "topic"): string {
  return kind === "queue" ? `${sourceQueue}.dlq` : `${sourceQueue}:dlq`;
}

/** The holding queue for retries of `sourceQueue` delayed by `delayMs`. */
export function retryQueueName(sourceQueue: string, delayMs: number): string {
  return `${sourceQueue}:retry.${Math.round(delayMs)}`;
}
