import { Headers, type JsonValue, type MessageEnvelope } from "@factflow/protocols";
import { type PreparedOutbound, PUBLISHED_AT_HEADER, parseAttempt } from "./outbound.js";

/** Values a broker carries outside the headers, used when the matching header is absent. */
export interface EnvelopeFallbacks {
  /** The broker's message id property (AMQP `message-id`, a STOMP send id...). */
  readonly id?: string | undefined;
  readonly correlationId?: string | undefined;
  /** The broker's priority field; wins over the `x-priority` header. */
  readonly priority?: number | undefined;
  /** The broker's timestamp, ISO-8601. */
  readonly publishedAt?: string | undefined;
}

/**
 * The headers to send for a prepared message when defaults travel implicitly: attempt 1 and a
 * correlation id equal to the id are left out (a receiver restores them), and the publish time is
 * added. Smaller headers mean more messages per consumer window on brokers that count bytes.
 * Returns a new object; `prepared.headers` is not changed.
 */
export function compactHeaders(prepared: PreparedOutbound): Record<string, string> {
  // A copy without the implicit correlation id (a `delete` would turn the object into a slow
  // dictionary), made by a loop rather than a spread: a spread copies quickly only while its call
  // site sees one shape of headers.
  const skipCorrelation = prepared.correlationId === prepared.id;
  const headers: Record<string, string> = {};
  for (const key in prepared.headers) {
    if (skipCorrelation && key === Headers.correlationId) continue;
    headers[key] = prepared.headers[key] as string;
  }
  if (prepared.attempt !== 1) headers[Headers.deliveryAttempt] = String(prepared.attempt);
  headers[PUBLISHED_AT_HEADER] = prepared.publishedAt;
  return headers;
}

/**
 * Rebuilds the envelope of a received message from its Factflow headers (the reverse of
 * `compactHeaders`), restoring what travelled implicitly: `x-message-id` (else `fallbacks.id`, else a
 * new UUID), `x-correlation-id` (else the id), `x-delivery-attempt` (else 1). The returned headers are
 * `headers` itself, completed with those three; pass a copy you own, without broker headers.
 */
export function envelopeFromHeaders(
  headers: Record<string, string>,
  body: JsonValue,
  fallbacks: EnvelopeFallbacks = {},
): { envelope: MessageEnvelope; attempt: number } {
  const id = headers[Headers.messageId] ?? fallbacks.id ?? globalThis.crypto.randomUUID();
  headers[Headers.messageId] = id;
  const correlationId = headers[Headers.correlationId] ?? fallbacks.correlationId ?? id;
  headers[Headers.correlationId] = correlationId;
  const attempt = parseAttempt(headers[Headers.deliveryAttempt]);
  headers[Headers.deliveryAttempt] = String(attempt);
  const headerPriority = headers[Headers.priority];
  const priority = fallbacks.priority ?? (headerPriority === undefined ? Number.NaN : Number(headerPriority));
  const envelope: { -readonly [K in keyof MessageEnvelope]: MessageEnvelope[K] } = {
    id,
    body,
    headers,
    correlationId,
    publishedAt: headers[PUBLISHED_AT_HEADER] ?? fallbacks.publishedAt ?? new Date().toISOString(),
  };
  const executionId = headers[Headers.executionId];
  if (executionId !== undefined) envelope.executionId = executionId;
  const traceparent = headers[Headers.traceparent];
  if (traceparent !== undefined) envelope.traceparent = traceparent;
  if (Number.isInteger(priority) && priority >= 0) envelope.priority = Math.min(priority, 9);
  return { envelope, attempt };
}
