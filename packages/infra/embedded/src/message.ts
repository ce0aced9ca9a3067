import { randomUUID } from "node:crypto";
import { findNonJson, Headers, type MessageEnvelope, type OutboundMessage } from "@factflow/protocols";
import { invalidInput } from "./errors.js";

/** Why and when a message was dead-lettered. */
export interface DeadInfo {
  reason: string;
  at: string;
  attempts: number;
  lastError: string | undefined;
}

/**
 * One copy of a message in one physical queue. The body is kept encoded: it is what the log stores,
 * it isolates the publisher's object from the consumer's, and it is what the size limit measures.
 */
export interface StoredMessage {
  seq: number;
  queueKey: string;
  readonly id: string;
  readonly bodyJson: string;
  /** Caller headers plus the identity headers; attempt and last error are added per delivery. */
  readonly headers: Readonly<Record<string, string>>;
  readonly correlationId: string;
  readonly executionId: string | undefined;
  readonly traceparent: string | undefined;
  readonly priority: number | undefined;
  readonly publishedAt: string;
  readonly bytes: number;
  attempt: number;
  /** Epoch ms before which it must not be delivered; 0 = now. */
  notBefore: number;
  lastError: string | undefined;
  redelivered: boolean;
  /** FIFO lane of the message, computed once per queue layout. */
  lane: string | undefined;
  dead: DeadInfo | undefined;
  /** Headers of the next delivery, built once per attempt (frozen, shared by nobody else). */
  deliveryHeaders: Readonly<Record<string, string>> | undefined;
}

/** A validated publish; `seq` and `queueKey` are filled in when the broker stores it. */
export type PreparedMessage = StoredMessage;

const RESERVED = new Set<string>([
  Headers.deliveryAttempt,
  Headers.messageId,
  Headers.correlationId,
  Headers.executionId,
  Headers.traceparent,
  Headers.priority,
]);

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.length === 0 || value.length > 1_000) {
    throw invalidInput(
      "invalid_message",
      `message.${field} must be a non-empty string of at most 1000 characters`,
    );
  }
  return value;
}

let isoAt = 0;
let iso = "";
/** ISO time of `now`, reused within one millisecond (thousands of publishes share one). */
function isoTime(now: number): string {
  if (now !== isoAt) {
    isoAt = now;
    iso = new Date(now).toISOString();
  }
  return iso;
}

/** Validates an outbound message and turns it into what the broker stores. */
export function prepareMessage(message: OutboundMessage, maxBytes: number, now: number): PreparedMessage {
  if (typeof message !== "object" || message === null) {
    throw invalidInput("invalid_message", "publish needs a message object like { body: {...} }");
  }
  if (!("body" in message))
    throw invalidInput("invalid_message", "message.body is missing: pass any JSON value");
  const bad = findNonJson(message.body);
  if (bad !== undefined) {
    throw invalidInput(
      "invalid_message",
      `message.body is not plain JSON at ${bad}: use only objects, arrays, strings, finite numbers, booleans and null`,
    );
  }
  const id = optionalString(message.id, "id") ?? randomUUID();
  const correlationId = optionalString(message.correlationId, "correlationId") ?? id;
  const executionId = optionalString(message.executionId, "executionId");
  const traceparent = optionalString(message.traceparent, "traceparent");
  const priority = message.priority;
  if (priority !== undefined && (!Number.isInteger(priority) || priority < 0 || priority > 9)) {
    throw invalidInput(
      "invalid_message",
      `message.priority must be an integer from 0 to 9, got ${String(priority)}`,
    );
  }
  const delayMs = message.delayMs;
  if (delayMs !== undefined && (typeof delayMs !== "number" || !Number.isFinite(delayMs) || delayMs < 0)) {
    throw invalidInput(
      "invalid_message",
      `message.delayMs must be a finite number >= 0, got ${String(delayMs)}`,
    );
  }
  const headers: Record<string, string> = {};
  let bytes = 0;
  if (message.headers !== undefined) {
    if (typeof message.headers !== "object" || message.headers === null || Array.isArray(message.headers)) {
      throw invalidInput("invalid_message", "message.headers must be an object of string values");
    }
    for (const [key, value] of Object.entries(message.headers)) {
      if (typeof value !== "string") {
        throw invalidInput(
          "invalid_message",
          `header "${key}" must be a string, got ${typeof value}: convert it with String()`,
        );
      }
      if (RESERVED.has(key)) continue;
      headers[key] = value;
      bytes += Buffer.byteLength(key) + Buffer.byteLength(value);
    }
  }
  headers[Headers.messageId] = id;
  headers[Headers.correlationId] = correlationId;
  if (executionId !== undefined) headers[Headers.executionId] = executionId;
  if (traceparent !== undefined) headers[Headers.traceparent] = traceparent;
  if (priority !== undefined) headers[Headers.priority] = String(priority);
  const bodyJson = JSON.stringify(message.body);
  bytes += Buffer.byteLength(bodyJson);
  if (bytes > maxBytes) {
    throw invalidInput(
      "message_too_large",
      `message is ${bytes} bytes (JSON body + headers), above the limit of ${maxBytes}: store large payloads elsewhere and send a reference, or raise maxMessageBytes`,
    );
  }
  return {
    id,
    bodyJson,
    headers,
    correlationId,
    executionId,
    traceparent,
    priority,
    publishedAt: isoTime(now),
    bytes,
    attempt: 1,
    notBefore: delayMs !== undefined && delayMs > 0 ? now + delayMs : 0,
    lastError: undefined,
    seq: 0,
    queueKey: "",
    redelivered: false,
    lane: undefined,
    dead: undefined,
    deliveryHeaders: undefined,
  };
}

/** The envelope a handler receives for this delivery (a fresh body object each time). */
export function toEnvelope(message: StoredMessage, extraHeaders?: Record<string, string>): MessageEnvelope {
  const headers: Record<string, string> = {
    ...message.headers,
    [Headers.deliveryAttempt]: String(message.attempt),
  };
  if (message.lastError !== undefined) headers[Headers.lastError] = message.lastError;
  if (extraHeaders !== undefined) Object.assign(headers, extraHeaders);
  const envelope: {
    -readonly [K in keyof MessageEnvelope]: MessageEnvelope[K];
  } = {
    id: message.id,
    body: JSON.parse(message.bodyJson),
    headers,
    correlationId: message.correlationId,
    publishedAt: message.publishedAt,
  };
  if (message.executionId !== undefined) envelope.executionId = message.executionId;
  if (message.traceparent !== undefined) envelope.traceparent = message.traceparent;
  if (message.priority !== undefined) envelope.priority = message.priority;
  return envelope;
}

/** The lane (FIFO group) of a message: the string form of a top-level body field, "" when absent. */
export function laneOf(message: StoredMessage, groupBy: string | undefined): string {
  if (groupBy === undefined) return "";
  const body: unknown = JSON.parse(message.bodyJson);
  if (typeof body !== "object" || body === null || Array.isArray(body)) return "";
  const value = (body as Record<string, unknown>)[groupBy];
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return "";
}
