import { randomUUID } from "node:crypto";
import { Headers, type JsonValue, type MessageEnvelope, type OutboundMessage } from "@factflow/protocols";
import { type GroupKeySpec, groupKeyOf, hasGroupKey, prepareOutbound } from "@factflow/provider-kit";
import { PROVIDER_NAME } from "./errors.js";

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
 *
 * In the file mode a waiting message may be paged out (see `memoryBudgetBytes`): its content (id,
 * body, headers, correlation, trace, publish time) is dropped from memory and read back from its
 * publish record in the log before it is delivered. What ordering, priority, delay and settlement
 * need stays in memory.
 */
export interface StoredMessage {
  seq: number;
  queueKey: string;
  id: string;
  bodyJson: string;
  /** Caller headers plus the identity headers; attempt and last error are added per delivery. */
  headers: Readonly<Record<string, string>>;
  correlationId: string;
  executionId: string | undefined;
  traceparent: string | undefined;
  readonly priority: number | undefined;
  publishedAt: string;
  readonly bytes: number;
  /** False while the content is paged out to the log. */
  resident: boolean;
  /** File mode: where the frame of its publish record starts in the log (-1 before it is written). */
  logOffset: number;
  /** File mode: the length of that frame, header included. */
  logLength: number;
  /** Where compaction rewrote the record, until the compacted log replaces the current one. */
  nextLogOffset: number;
  nextLogLength: number;
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

/**
 * Validates an outbound message and turns it into what the broker stores. Factflow identity headers
 * a caller puts in `headers` are ignored: the message fields alone say who a message is, and the
 * broker keeps the attempt itself.
 */
export function prepareMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
  now: number,
): PreparedMessage {
  const p = prepareOutbound(PROVIDER_NAME, destination, message, {
    maxBytes,
    identityHeaders: "drop",
    now,
    newId: randomUUID,
  });
  return {
    id: p.id,
    bodyJson: p.bodyJson,
    headers: p.headers,
    correlationId: p.correlationId,
    executionId: p.executionId,
    traceparent: p.traceparent,
    priority: p.priority,
    publishedAt: p.publishedAt,
    bytes: p.bytes,
    attempt: 1,
    notBefore: p.delayMs > 0 ? now + p.delayMs : 0,
    lastError: undefined,
    seq: 0,
    queueKey: "",
    redelivered: false,
    lane: undefined,
    dead: undefined,
    deliveryHeaders: undefined,
    resident: true,
    logOffset: -1,
    logLength: 0,
    nextLogOffset: -1,
    nextLogLength: 0,
  };
}

/** The part of a message that paging drops and reads back from the log. */
export interface MessageContent {
  readonly id: string;
  readonly bodyJson: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly correlationId: string;
  readonly executionId: string | undefined;
  readonly traceparent: string | undefined;
  readonly publishedAt: string;
}

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** Drops the content of a message whose publish record is in the log (the caller checked). */
export function dropContent(message: StoredMessage): void {
  message.resident = false;
  message.id = "";
  message.bodyJson = "";
  message.headers = NO_HEADERS;
  message.correlationId = "";
  message.executionId = undefined;
  message.traceparent = undefined;
  message.publishedAt = "";
}

/** Puts content read back from the log into a paged-out message. */
export function restoreContent(message: StoredMessage, content: MessageContent): void {
  message.id = content.id;
  message.bodyJson = content.bodyJson;
  message.headers = content.headers;
  message.correlationId = content.correlationId;
  message.executionId = content.executionId;
  message.traceparent = content.traceparent;
  message.publishedAt = content.publishedAt;
  message.resident = true;
}

/** The envelope a handler receives for this delivery (a fresh body object each time). */
export function toEnvelope(message: StoredMessage, extraHeaders?: Record<string, string>): MessageEnvelope {
  // Object.assign, not a spread: V8 copies an object by spread quickly only while the call site sees
  // one hidden class, and headers come in many shapes (a spread here costs ~1 µs per delivery).
  const headers: Record<string, string> = Object.assign({}, message.headers);
  headers[Headers.deliveryAttempt] = String(message.attempt);
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

/**
 * The lane (FIFO group) of a message: the kit's group key (a body field or path, or a header), ""
 * for a strict FIFO queue without a key.
 */
export function laneOf(message: StoredMessage, key: GroupKeySpec): string {
  if (!hasGroupKey(key)) return "";
  const body: unknown = key.groupBy === undefined ? null : JSON.parse(message.bodyJson);
  return groupKeyOf({ body: body as JsonValue, headers: message.headers }, key);
}
