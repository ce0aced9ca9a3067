import type { JsonValue } from "./json.js";

/**
 * A message as a handler receives it. The body is always JSON; headers are always strings.
 */
export interface MessageEnvelope {
  /** Stable identity across retries, redrives and broker redeliveries (header `x-message-id`). */
  readonly id: string;
  /** The JSON payload. */
  readonly body: JsonValue;
  /** String headers, including `x-delivery-attempt`, `x-correlation-id` and any user headers. */
  readonly headers: Readonly<Record<string, string>>;
  /** Identity of one logical unit of work through a pipeline; defaults to `id`. */
  readonly correlationId: string;
  /** The execution that owns this message, when it belongs to one. */
  readonly executionId?: string;
  /** W3C trace context, when the publisher had one. */
  readonly traceparent?: string;
  /** Priority 0–9 (9 highest) when set; honoured by providers whose capabilities say so. */
  readonly priority?: number;
  /** ISO-8601 time the message was first published. */
  readonly publishedAt: string;
}

/**
 * What a caller hands to `publish`. Everything except the body is optional; the provider fills the
 * rest (a UUID id, correlation id = id, attempt 1).
 */
export interface OutboundMessage {
  body: JsonValue;
  /** Keep a known id (a retry, a redrive, a replay); otherwise a new UUID is minted. */
  id?: string;
  headers?: Record<string, string>;
  correlationId?: string;
  executionId?: string;
  traceparent?: string;
  /** 0–9, 9 highest. */
  priority?: number;
  /** Deliver no earlier than this many milliseconds from now. */
  delayMs?: number;
}

/**
 * Destinations are strings with a kind prefix: `/queue/<name>` (point-to-point: each message goes to
 * one consumer) or `/topic/<name>` (broadcast: every subscription gets a copy). A name is one or more
 * `/`-separated segments of `[A-Za-z0-9_.:-]`. Each provider's naming strategy maps it to its broker.
 */
export type Destination = `/queue/${string}` | `/topic/${string}`;

export const QUEUE_PREFIX = "/queue/";
export const TOPIC_PREFIX = "/topic/";

const SEGMENT = /^[A-Za-z0-9_.:-]+$/;

/** The kind and bare name of a destination, or a description of what is wrong with it. */
export function parseDestination(
  destination: string,
): { kind: "queue" | "topic"; name: string } | { error: string } {
  let kind: "queue" | "topic";
  let name: string;
  if (destination.startsWith(QUEUE_PREFIX)) {
    kind = "queue";
    name = destination.slice(QUEUE_PREFIX.length);
  } else if (destination.startsWith(TOPIC_PREFIX)) {
    kind = "topic";
    name = destination.slice(TOPIC_PREFIX.length);
  } else {
    return { error: `destination "${destination}" must start with "/queue/" or "/topic/"` };
  }
  if (name.length === 0 || name.length > 200) {
    return { error: `destination "${destination}" needs a name of 1 to 200 characters after the prefix` };
  }
  for (const segment of name.split("/")) {
    if (!SEGMENT.test(segment)) {
      return {
        error: `destination "${destination}" has an invalid segment "${segment}": use only letters, digits, "_", ".", ":" and "-", separated by "/"`,
      };
    }
  }
  return { kind, name };
}

/** The dead-letter destination of a queue: `<queue>.dlq`. */
export function deadLetterQueueOf(queue: string): string {
  return `${queue}.dlq`;
}
