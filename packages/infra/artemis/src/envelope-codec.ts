import { randomBytes, randomUUID } from "node:crypto";
import {
  type JsonValue,
  type MessageEnvelope,
  type OutboundMessage,
  ProviderError,
} from "@factflow/protocols";
import { compactHeaders, envelopeFromHeaders, prepareOutbound } from "@factflow/provider-kit";
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

const STOMP_RESERVED = { test: isProtocolHeader, by: "STOMP/Artemis" } as const;

/**
 * Validates an outbound message (see `prepareOutbound`; STOMP/Artemis header names are refused) and
 * turns it into a JSON body and string headers. Fills the id, the correlation id, attempt 1 and the
 * publish time unless the caller carried them. Defaults travel implicitly (decode restores them):
 * Artemis' consumer window counts bytes, so every header left out is room for more messages in flight.
 */
export function encodeMessage(
  destination: string,
  message: OutboundMessage,
  maxBytes: number,
): EncodedMessage {
  const prepared = prepareOutbound("artemis", destination, message, {
    maxBytes,
    reservedHeaders: STOMP_RESERVED,
    newId: randomUUID,
  });
  return {
    id: prepared.id,
    body: prepared.bodyJson,
    headers: compactHeaders(prepared),
    delayMs: prepared.delayMs,
    ...(prepared.priority === undefined ? {} : { priority: prepared.priority }),
  };
}

/** STOMP headers of a SEND: Factflow headers plus persistence, priority and the broker-side delay. */
export function sendHeaders(
  encoded: Pick<EncodedMessage, "headers" | "priority" | "delayMs">,
  routing: "ANYCAST" | "MULTICAST",
): Record<string, string> {
  // Object.assign, not a spread: a spread is only fast while its call site sees one shape of headers.
  const headers: Record<string, string> = Object.assign({}, encoded.headers);
  headers[SEND_ID_HEADER] = nextSendId();
  headers["destination-type"] = routing;
  headers.persistent = "true";
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
  for (const key in headers) if (!isProtocolHeader(key)) own[key] = headers[key] as string;
  const sendId = headers[SEND_ID_HEADER];
  const { envelope, attempt } = envelopeFromHeaders(own, parsed, { id: sendId ?? headers["message-id"] });
  return { envelope, attempt, sendId, redelivered: headers.redelivered === "true" };
}

/**
 * Decodes a MESSAGE frame, or says why it is not a Factflow message: then `decoded` holds its body
 * as a JSON string, which its dead letter keeps.
 */
export function decodeFrame(
  headers: Readonly<Record<string, string>>,
  body: string,
): { readonly decoded: DecodedMessage; readonly error: string | undefined } {
  try {
    return { decoded: decodeMessage(headers, body), error: undefined };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { decoded: decodeMessage(headers, JSON.stringify(body)), error: reason };
  }
}
