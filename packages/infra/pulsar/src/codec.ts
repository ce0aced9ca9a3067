import { randomUUID } from "node:crypto";
import { Headers, type JsonValue, type MessageEnvelope, type OutboundMessage } from "@factflow/protocols";
import { envelopeFromHeaders, PUBLISHED_AT_HEADER, prepareOutbound } from "@factflow/provider-kit";

/**
 * A Factflow message as one Pulsar payload: the UTF-8 JSON text `{"h":{headers},"b":body}`.
 * Headers travel inside the payload rather than as Pulsar properties so that the admin REST API's
 * peek (dead-letter browse) returns them byte for byte (HTTP headers would fold their case and
 * mangle non-ASCII failure text).
 */
export interface EncodedMessage {
  readonly id: string;
  /** The payload, base64 as the WebSocket API sends it. */
  readonly payload: string;
  /** Milliseconds to hold the message back (Pulsar `deliverAfterMs`); 0 = now. */
  readonly delayMs: number;
}

/** The payload text for `headers` and a body already serialised as JSON. */
export function payloadText(headers: Readonly<Record<string, string>>, bodyJson: string): string {
  return `{"h":${JSON.stringify(headers)},"b":${bodyJson}}`;
}

/** Base64 of a payload text. */
export function toBase64(text: string): string {
  return Buffer.from(text, "utf8").toString("base64");
}

/**
 * Validates an outbound message (see the kit's `prepareOutbound`) and encodes it. Attempt 1 and a
 * correlation id equal to the id travel implicitly; the publish time is added.
 */
export function encodeMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
): EncodedMessage {
  const prepared = prepareOutbound("pulsar", destination, message, { maxBytes, newId: randomUUID });
  const headers: Record<string, string> = {};
  for (const key in prepared.headers) {
    if (key === Headers.correlationId && prepared.correlationId === prepared.id) continue;
    headers[key] = prepared.headers[key] as string;
  }
  if (prepared.attempt !== 1) headers[Headers.deliveryAttempt] = String(prepared.attempt);
  headers[PUBLISHED_AT_HEADER] = prepared.publishedAt;
  return {
    id: prepared.id,
    payload: toBase64(payloadText(headers, prepared.bodyJson)),
    delayMs: prepared.delayMs,
  };
}

/** A received payload split into its headers (a fresh object) and body. */
export interface DecodedPayload {
  readonly headers: Record<string, string>;
  readonly body: JsonValue;
}

/** Parses a payload (base64 from the WebSocket API, or raw bytes from a peek). */
export function decodePayload(payload: string | Buffer): DecodedPayload | { error: string } {
  const text =
    typeof payload === "string" ? Buffer.from(payload, "base64").toString("utf8") : payload.toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { error: "payload is not valid JSON" };
  }
  if (typeof parsed !== "object" || parsed === null || !("b" in parsed)) {
    return { error: 'payload is not a Factflow message ({"h":{...},"b":...})' };
  }
  const raw = (parsed as { h?: unknown }).h;
  const headers: Record<string, string> = {};
  if (typeof raw === "object" && raw !== null) {
    for (const [key, value] of Object.entries(raw)) if (typeof value === "string") headers[key] = value;
  }
  return { headers, body: (parsed as { b: JsonValue }).b };
}

/** Rebuilds the envelope of a received payload, or explains why it is not a Factflow message. */
export function decodeMessage(
  payload: string | Buffer,
  fallbackPublishedAt?: string,
):
  | { envelope: MessageEnvelope; attempt: number; headers: Record<string, string>; body: JsonValue }
  | { error: string } {
  const decoded = decodePayload(payload);
  if ("error" in decoded) return decoded;
  // The envelope owns one copy of the headers; the other stays as received, for copies to re-publish.
  const { envelope, attempt } = envelopeFromHeaders(Object.assign({}, decoded.headers), decoded.body, {
    publishedAt: fallbackPublishedAt,
  });
  return { envelope, attempt, headers: decoded.headers, body: decoded.body };
}

/** The payload of a copy of a received message with its headers rewritten (retry, dead letter, redrive). */
export function copyPayload(
  headers: Readonly<Record<string, string>>,
  body: JsonValue,
  rewrite: (headers: Record<string, string>) => Record<string, string>,
): string {
  return toBase64(payloadText(rewrite({ ...headers }), JSON.stringify(body)));
}
