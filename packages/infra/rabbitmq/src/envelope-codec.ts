import { randomUUID } from "node:crypto";
import {
  findNonJson,
  Headers,
  type JsonValue,
  type MessageEnvelope,
  type OutboundMessage,
  ProviderError,
} from "@factflow/protocols";
import type { Message, Options } from "amqplib";

/** Header carrying the ISO-8601 time of the first publish. */
export const PUBLISHED_AT_HEADER = "x-published-at";

/**
 * A message ready for `channel.publish`. The id and correlation id travel as the AMQP `message-id`
 * and `correlation-id` properties rather than headers (a smaller header table for the client and
 * the broker to encode); decoding puts them back into the envelope's headers.
 */
export interface EncodedMessage {
  readonly id: string;
  readonly correlationId: string;
  readonly content: Buffer;
  /** Headers as sent on the wire. */
  readonly headers: Record<string, string>;
  readonly priority?: number;
}

function invalidMessage(message: string): ProviderError {
  return new ProviderError("rabbitmq", "invalid-input", message, { code: "invalid_message" });
}

/**
 * Validates an outbound message and turns it into bytes + string headers. Fills the id, the
 * correlation id, attempt 1 and the publish time unless the caller carried them.
 */
export function encodeMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
): EncodedMessage {
  if (message === null || typeof message !== "object")
    throw invalidMessage(`publish to "${destination}" needs a message object with a "body"`);
  const bad = findNonJson(message.body);
  if (bad !== undefined || message.body === undefined) {
    throw invalidMessage(
      `message body for "${destination}" is not plain JSON at ${bad ?? "$"}; send only JSON values`,
    );
  }
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(message.headers ?? {})) {
    if (typeof value !== "string")
      throw invalidMessage(`header "${key}" for "${destination}" must be a string, got ${typeof value}`);
    headers[key] = value;
  }
  if (
    message.priority !== undefined &&
    !(Number.isInteger(message.priority) && message.priority >= 0 && message.priority <= 9)
  ) {
    throw invalidMessage(
      `priority for "${destination}" must be an integer from 0 to 9, got ${String(message.priority)}`,
    );
  }
  if (message.delayMs !== undefined && !(Number.isFinite(message.delayMs) && message.delayMs >= 0)) {
    throw invalidMessage(`delayMs for "${destination}" must be a non-negative number`);
  }
  const id = message.id ?? headers[Headers.messageId] ?? randomUUID();
  const correlationId = message.correlationId ?? headers[Headers.correlationId] ?? id;
  delete headers[Headers.messageId];
  delete headers[Headers.correlationId];
  if (message.executionId !== undefined) headers[Headers.executionId] = message.executionId;
  if (message.traceparent !== undefined) headers[Headers.traceparent] = message.traceparent;
  if (message.priority !== undefined) headers[Headers.priority] = String(message.priority);
  // Attempt 1 is the default when the header is absent, so it is not sent.
  if (headers[Headers.deliveryAttempt] === "1") delete headers[Headers.deliveryAttempt];
  headers[PUBLISHED_AT_HEADER] ??= new Date().toISOString();
  const content = Buffer.from(JSON.stringify(message.body));
  let size = content.length + Buffer.byteLength(id) + Buffer.byteLength(correlationId);
  for (const [key, value] of Object.entries(headers))
    size += Buffer.byteLength(key) + Buffer.byteLength(value);
  if (size > maxBytes) {
    throw new ProviderError(
      "rabbitmq",
      "invalid-input",
      `message for "${destination}" is ${size} bytes (body + headers); the limit is ${maxBytes}. Store large payloads in storage and send their key`,
      { code: "message_too_large" },
    );
  }
  return message.priority === undefined
    ? { id, correlationId, content, headers }
    : { id, correlationId, content, headers, priority: message.priority };
}

/** AMQP publish options of an encoded message: persistent, JSON, with its ids and priority. */
export function publishOptions(encoded: EncodedMessage, mandatory: boolean): Options.Publish {
  const options: Options.Publish = {
    persistent: true,
    mandatory,
    contentType: "application/json",
    messageId: encoded.id,
    correlationId: encoded.correlationId,
    headers: encoded.headers,
  };
  if (encoded.priority !== undefined) options.priority = encoded.priority;
  return options;
}

/** Broker-added headers that are not strings and mean nothing to a handler. */
const BROKER_HEADER = /^x-(death|first-death-|last-death-)/;

/** The string headers of a received AMQP message (numbers and booleans stringified, tables dropped). */
export function stringHeaders(message: Message): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(message.properties.headers ?? {})) {
    if (BROKER_HEADER.test(key)) continue;
    if (typeof value === "string") out[key] = value;
    else if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint")
      out[key] = String(value);
    else if (Buffer.isBuffer(value)) out[key] = value.toString("utf8");
  }
  return out;
}

/** Rebuilds the envelope of a received message, or explains why it is not a Factflow message. */
export function decodeMessage(
  message: Message,
): { envelope: MessageEnvelope; attempt: number } | { error: string } {
  let body: JsonValue;
  try {
    body = JSON.parse(message.content.toString("utf8")) as JsonValue;
  } catch {
    return { error: "body is not valid JSON" };
  }
  const headers = stringHeaders(message);
  const props = message.properties;
  const id =
    headers[Headers.messageId] ?? (typeof props.messageId === "string" ? props.messageId : randomUUID());
  headers[Headers.messageId] = id;
  const correlationId =
    headers[Headers.correlationId] ?? (typeof props.correlationId === "string" ? props.correlationId : id);
  headers[Headers.correlationId] = correlationId;
  const parsedAttempt = Number.parseInt(headers[Headers.deliveryAttempt] ?? "1", 10);
  const attempt = Number.isFinite(parsedAttempt) && parsedAttempt >= 1 ? parsedAttempt : 1;
  headers[Headers.deliveryAttempt] = String(attempt);
  const rawPriority = typeof props.priority === "number" ? props.priority : Number(headers[Headers.priority]);
  const publishedAt =
    headers[PUBLISHED_AT_HEADER] ??
    (typeof props.timestamp === "number"
      ? new Date(props.timestamp * 1000).toISOString()
      : new Date().toISOString());
  const envelope: {
    -readonly [K in keyof MessageEnvelope]: MessageEnvelope[K];
  } = { id, body, headers, correlationId, publishedAt };
  const executionId = headers[Headers.executionId];
  if (executionId !== undefined) envelope.executionId = executionId;
  const traceparent = headers[Headers.traceparent];
  if (traceparent !== undefined) envelope.traceparent = traceparent;
  if (Number.isInteger(rawPriority) && rawPriority >= 0) envelope.priority = Math.min(rawPriority, 9);
  return { envelope, attempt };
}
