import { randomUUID } from "node:crypto";
import { Headers, type JsonValue, type MessageEnvelope, type OutboundMessage } from "@factflow/protocols";
import { envelopeFromHeaders, PUBLISHED_AT_HEADER, prepareOutbound } from "@factflow/provider-kit";
import type { Message, Options } from "amqplib";

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

/**
 * Validates an outbound message (see `prepareOutbound`) and turns it into bytes + string headers.
 * Fills the id, the correlation id, attempt 1 and the publish time unless the caller carried them.
 */
export function encodeMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
): EncodedMessage {
  const prepared = prepareOutbound("rabbitmq", destination, message, { maxBytes, newId: randomUUID });
  // `compactHeaders` minus the two ids, built in one pass: deleting keys from the copy would turn it
  // into a slow dictionary-mode object that amqplib then walks to encode the header table.
  const headers: Record<string, string> = {};
  for (const key in prepared.headers) {
    if (key !== Headers.messageId && key !== Headers.correlationId) headers[key] = prepared.headers[key]!;
  }
  if (prepared.attempt !== 1) headers[Headers.deliveryAttempt] = String(prepared.attempt);
  headers[PUBLISHED_AT_HEADER] = prepared.publishedAt;
  const content = Buffer.from(prepared.bodyJson);
  const { id, correlationId, priority } = prepared;
  return priority === undefined
    ? { id, correlationId, content, headers }
    : { id, correlationId, content, headers, priority };
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
  const props = message.properties;
  return envelopeFromHeaders(stringHeaders(message), body, {
    id: typeof props.messageId === "string" ? props.messageId : undefined,
    correlationId: typeof props.correlationId === "string" ? props.correlationId : undefined,
    priority: typeof props.priority === "number" ? props.priority : undefined,
    publishedAt:
      typeof props.timestamp === "number" ? new Date(props.timestamp * 1000).toISOString() : undefined,
  });
}
