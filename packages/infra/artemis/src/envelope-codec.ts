import { randomBytes, randomUUID } from "node:crypto";
import {
  findNonJson,
  Headers,
  type JsonValue,
  type MessageEnvelope,
  type OutboundMessage,
  ProviderError,
} from "@factflow/protocols";

/** Header carrying the ISO-8601 time of the first publish. */
export const PUBLISHED_AT_HEADER = "x-published-at";
/**
 * A fresh id per SEND: the identity of one broker message. A redelivery of the same broker message
 * carries the same value, while STOMP mints a new `message-id`/`ack` every time; the settlement
 * guard keys on it to notice that a delivery was reissued.
 */
export const SEND_ID_HEADER = "x-send-id";
/** Process-unique prefix of send ids; with a counter it stays short (the consumer window counts bytes). */
const SEND_ID_PREFIX = randomBytes(9).toString("base64url");
let sendCounter = 0;

/** A new id for one SEND, unique across processes. */
export function nextSendId(): string {
  sendCounter += 1;
  return `${SEND_ID_PREFIX}${sendCounter.toString(36)}`;
}

/** Selector-friendly copy of the message id on dead letters (Artemis selectors cannot name `x-message-id`). */
export const DLQ_ID_HEADER = "factflow_dlq_id";

/** Headers that belong to STOMP or Artemis rather than to the message. */
const PROTOCOL_HEADERS = new Set([
  "destination",
  "destination-type",
  "subscription",
  "subscription-type",
  "message-id",
  "ack",
  "content-length",
  "content-type",
  "persistent",
  "priority",
  "redelivered",
  "expires",
  "timestamp",
  "receipt",
  "reply-to",
  "correlation-id",
  "type",
  "ingress-timestamp",
  "amqMessageId",
  "AMQ_SCHEDULED_DELAY",
  "AMQ_SCHEDULED_TIME",
  SEND_ID_HEADER,
  DLQ_ID_HEADER,
]);

function isProtocolHeader(name: string): boolean {
  return PROTOCOL_HEADERS.has(name) || name.startsWith("_AMQ") || name.startsWith("JMS");
}

/** A message ready for a STOMP SEND. */
export interface EncodedMessage {
  readonly id: string;
  readonly body: string;
  /** Factflow headers (no STOMP headers). */
  readonly headers: Record<string, string>;
  readonly priority?: number;
  readonly delayMs: number;
}

function invalid(message: string): ProviderError {
  return new ProviderError("artemis", "invalid-input", message, { code: "invalid_message" });
}

/**
 * Validates an outbound message and turns it into a JSON body and string headers. Fills the id, the
 * correlation id, attempt 1 and the publish time unless the caller carried them.
 */
export function encodeMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
): EncodedMessage {
  if (message === null || typeof message !== "object")
    throw invalid(`publish to "${destination}" needs a message object with a "body"`);
  const bad = message.body === undefined ? "$" : findNonJson(message.body);
  if (bad !== undefined)
    throw invalid(`message body for "${destination}" is not plain JSON at ${bad}; send only JSON values`);
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(message.headers ?? {})) {
    if (typeof value !== "string")
      throw invalid(`header "${key}" for "${destination}" must be a string, got ${typeof value}`);
    if (isProtocolHeader(key))
      throw invalid(`header "${key}" for "${destination}" is reserved by STOMP/Artemis; rename it`);
    headers[key] = value;
  }
  const { priority, delayMs } = message;
  if (priority !== undefined && !(Number.isInteger(priority) && priority >= 0 && priority <= 9))
    throw invalid(`priority for "${destination}" must be an integer from 0 to 9, got ${String(priority)}`);
  if (delayMs !== undefined && !(Number.isFinite(delayMs) && delayMs >= 0))
    throw invalid(`delayMs for "${destination}" must be a non-negative number`);
  const id = message.id ?? headers[Headers.messageId] ?? randomUUID();
  headers[Headers.messageId] = id;
  // Defaults travel implicitly (decode restores them): Artemis' consumer window counts bytes, so
  // every header left out is room for more messages in flight.
  const correlationId = message.correlationId ?? headers[Headers.correlationId] ?? id;
  if (correlationId === id) delete headers[Headers.correlationId];
  else headers[Headers.correlationId] = correlationId;
  if (headers[Headers.deliveryAttempt] === "1") delete headers[Headers.deliveryAttempt];
  if (message.executionId !== undefined) headers[Headers.executionId] = message.executionId;
  if (message.traceparent !== undefined) headers[Headers.traceparent] = message.traceparent;
  if (priority !== undefined) headers[Headers.priority] = String(priority);
  headers[PUBLISHED_AT_HEADER] ??= new Date().toISOString();
  const body = JSON.stringify(message.body);
  let size = Buffer.byteLength(body);
  for (const [key, value] of Object.entries(headers))
    size += Buffer.byteLength(key) + Buffer.byteLength(value);
  if (size > maxBytes) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      `message for "${destination}" is ${size} bytes, above maxMessageBytes ${maxBytes}; store large payloads as artefacts and send a reference`,
      { code: "message_too_large" },
    );
  }
  return {
    id,
    body,
    headers,
    delayMs: delayMs ?? 0,
    ...(priority === undefined ? {} : { priority }),
  };
}

/** STOMP headers of a SEND: Factflow headers plus persistence, priority and the broker-side delay. */
export function sendHeaders(
  encoded: Pick<EncodedMessage, "headers" | "priority" | "delayMs">,
  routing: "ANYCAST" | "MULTICAST",
): Record<string, string> {
  const headers: Record<string, string> = {
    ...encoded.headers,
    [SEND_ID_HEADER]: nextSendId(),
    "destination-type": routing,
    persistent: "true",
  };
  if (encoded.priority !== undefined) headers.priority = String(encoded.priority);
  // Artemis turns AMQ_SCHEDULED_DELAY into _AMQ_SCHED_DELIVERY = broker clock + delay (a STOMP header
  // named _AMQ_SCHED_DELIVERY arrives as a string property and is ignored by the scheduler).
  if (encoded.delayMs > 0) headers.AMQ_SCHEDULED_DELAY = String(Math.round(encoded.delayMs));
  return headers;
}

/** What arrived in a MESSAGE frame, decoded. */
export interface DecodedMessage {
  readonly envelope: MessageEnvelope;
  readonly attempt: number;
  readonly sendId: string | undefined;
  readonly redelivered: boolean;
}

/** Decodes a MESSAGE frame; throws `invalid_message` when the body is not JSON. */
export function decodeMessage(headers: Readonly<Record<string, string>>, body: string): DecodedMessage {
  let parsed: JsonValue;
  try {
    parsed = JSON.parse(body) as JsonValue;
  } catch (error) {
    throw new ProviderError(
      "artemis",
      "invalid-input",
      "a delivered message body is not JSON; it was not sent by Factflow",
      {
        code: "invalid_message",
        cause: error,
      },
    );
  }
  const own: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) if (!isProtocolHeader(key)) own[key] = value;
  const sendId = headers[SEND_ID_HEADER];
  const id = own[Headers.messageId] ?? sendId ?? headers["message-id"] ?? randomUUID();
  own[Headers.messageId] = id;
  const attemptText = own[Headers.deliveryAttempt] ?? "1";
  own[Headers.deliveryAttempt] = attemptText;
  const attempt = Math.max(1, Number.parseInt(attemptText, 10) || 1);
  const correlationId = own[Headers.correlationId] ?? id;
  own[Headers.correlationId] = correlationId;
  const priorityText = own[Headers.priority] ?? headers.priority;
  const priority = priorityText === undefined ? undefined : Number(priorityText);
  const envelope: MessageEnvelope = {
    id,
    body: parsed,
    headers: own,
    correlationId,
    publishedAt: own[PUBLISHED_AT_HEADER] ?? new Date().toISOString(),
    ...(own[Headers.executionId] === undefined ? {} : { executionId: own[Headers.executionId] }),
    ...(own[Headers.traceparent] === undefined ? {} : { traceparent: own[Headers.traceparent] }),
    ...(own[Headers.priority] === undefined || priority === undefined || Number.isNaN(priority)
      ? {}
      : { priority }),
  };
  return { envelope, attempt, sendId, redelivered: headers.redelivered === "true" };
}
