import {
  findNonJson,
  Headers,
  type OutboundMessage,
  ProviderError,
  parseDestination,
} from "@factflow/protocols";

/**
 * Header carrying the ISO-8601 time of the first publish. Brokers without a field of their own for it
 * carry it as a header, so a retried or redriven copy keeps the original time.
 */
export const PUBLISHED_AT_HEADER = "x-published-at";

/** The Factflow headers that describe a message's identity rather than being user data. */
const IDENTITY_HEADERS: ReadonlySet<string> = new Set([
  Headers.deliveryAttempt,
  Headers.messageId,
  Headers.correlationId,
  Headers.executionId,
  Headers.traceparent,
  Headers.priority,
]);

/** How `prepareOutbound` treats one broker's particulars. */
export interface PrepareOutboundOptions {
  /** The size limit of body + headers, in UTF-8 bytes (the provider's `maxMessageBytes`). */
  readonly maxBytes: number;
  /**
   * What to do with Factflow identity headers (`x-message-id`, `x-correlation-id`,
   * `x-delivery-attempt`, `x-execution-id`, `traceparent`, `x-published-at`) the caller put in
   * `headers`. `"keep"`: they count where the matching message field is absent, so a copy built from
   * a received envelope's headers keeps its id, attempt and publish time. `"drop"`: they are ignored
   * (the message fields alone say who the message is), as are `x-priority` headers.
   * @default "keep"
   */
  readonly identityHeaders?: "keep" | "drop";
  /**
   * Header names the broker's protocol reserves, which a caller may not set, and who reserves them
   * (named in the error), e.g. `{ test: isStompHeader, by: "STOMP/Artemis" }`.
   */
  readonly reservedHeaders?: { readonly test: (name: string) => boolean; readonly by: string };
  /** Epoch milliseconds of the publish. @default Date.now() */
  readonly now?: number;
  /**
   * Mints the id of a message that has none. Node's `crypto.randomUUID` is faster than the Web Crypto
   * one this package can reach without Node imports. @default globalThis.crypto.randomUUID
   */
  readonly newId?: () => string;
}

/** A validated, normalised outbound message, ready for a provider to put on its wire or in its store. */
export interface PreparedOutbound {
  /** The caller's id, or a new UUID. */
  readonly id: string;
  /** The caller's correlation id, or `id`. */
  readonly correlationId: string;
  readonly executionId: string | undefined;
  readonly traceparent: string | undefined;
  /** 0–9 when set. */
  readonly priority: number | undefined;
  /** Milliseconds to hold the message back; 0 = deliver now. */
  readonly delayMs: number;
  /** The delivery attempt the message starts at (1 unless a kept `x-delivery-attempt` says otherwise). */
  readonly attempt: number;
  /** ISO-8601 time of the first publish. */
  readonly publishedAt: string;
  /**
   * The caller's headers plus `x-message-id`, `x-correlation-id` and, when set, `x-execution-id`,
   * `traceparent` and `x-priority`. Neither the attempt nor the publish time is in it: providers carry
   * those in their own way (attempt 1 is usually left implicit).
   */
  readonly headers: Record<string, string>;
  /** The body as JSON text. */
  readonly bodyJson: string;
  /** UTF-8 bytes of `bodyJson` plus every key and value of `headers`: what the size limit measures. */
  readonly bytes: number;
}

const nativeBuffer = (globalThis as { Buffer?: { byteLength(text: string): number } }).Buffer;
const encoder = new TextEncoder();

/** UTF-8 length of a string. */
function utf8Length(text: string): number {
  return nativeBuffer !== undefined ? nativeBuffer.byteLength(text) : encoder.encode(text).length;
}

let isoAt = Number.NaN;
let iso = "";
/** ISO time of `now`, reused within one millisecond (thousands of publishes share one). */
function isoTime(now: number): string {
  if (now !== isoAt) {
    isoAt = now;
    iso = new Date(now).toISOString();
  }
  return iso;
}

/** A `ProviderError` for bad caller input: reason `invalid-input`, never retryable. */
export function invalidInputError(
  provider: string,
  code: "invalid_message" | "message_too_large" | "invalid_destination" | "invalid_argument",
  message: string,
): ProviderError {
  return new ProviderError(provider, "invalid-input", message, { code, retryable: false });
}

/**
 * Checks a destination string (`/queue/<name>` or `/topic/<name>`) and returns its kind and bare
 * name; throws `invalid_destination` saying what is wrong with it.
 */
export function checkDestination(
  provider: string,
  destination: string,
): { kind: "queue" | "topic"; name: string } {
  if (typeof destination !== "string") {
    throw invalidInputError(
      provider,
      "invalid_destination",
      `destination must be a string like "/queue/orders", got ${typeof destination}`,
    );
  }
  const parsed = parseDestination(destination);
  if ("error" in parsed) throw invalidInputError(provider, "invalid_destination", parsed.error);
  return parsed;
}

function optionalString(provider: string, value: unknown, field: string, destination: string) {
  if (value === undefined) return undefined;
  if (typeof value !== "string" || value.length === 0 || value.length > 1_000) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `message.${field} for "${destination}" must be a non-empty string of at most 1000 characters`,
    );
  }
  return value;
}

/**
 * Validates what a caller handed to `publish` and normalises it, the same way on every broker: the
 * body must be plain JSON, headers strings, the priority 0–9, the delay a finite number ≥ 0, and body +
 * headers within `maxBytes`. Fills the id (a new UUID), the correlation id (= id), the attempt (1) and
 * the publish time. Throws a `ProviderError` of reason `invalid-input` with code `invalid_message` or
 * `message_too_large`, naming the destination and how to fix it. It does not check the destination
 * itself (see `checkDestination`).
 */
export function prepareOutbound(
  provider: string,
  destination: string,
  message: OutboundMessage,
  options: PrepareOutboundOptions,
): PreparedOutbound {
  if (typeof message !== "object" || message === null) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `publish to "${destination}" needs a message object like { body: {...} }`,
    );
  }
  if (!("body" in message) || message.body === undefined) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `message for "${destination}" has no body: pass any JSON value`,
    );
  }
  const bad = findNonJson(message.body);
  if (bad !== undefined) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `message body for "${destination}" is not plain JSON at ${bad}: use only objects, arrays, strings, finite numbers, booleans and null`,
    );
  }
  const priority = message.priority;
  if (priority !== undefined && !(Number.isInteger(priority) && priority >= 0 && priority <= 9)) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `priority for "${destination}" must be an integer from 0 to 9, got ${String(priority)}`,
    );
  }
  const delayMs = message.delayMs;
  if (delayMs !== undefined && !(typeof delayMs === "number" && Number.isFinite(delayMs) && delayMs >= 0)) {
    throw invalidInputError(
      provider,
      "invalid_message",
      `delayMs for "${destination}" must be a finite number >= 0, got ${String(delayMs)}`,
    );
  }
  const keep = options.identityHeaders !== "drop";
  const reserved = options.reservedHeaders;
  const headers: Record<string, string> = {};
  let carried: Record<string, string> | undefined;
  if (message.headers !== undefined) {
    if (typeof message.headers !== "object" || message.headers === null || Array.isArray(message.headers)) {
      throw invalidInputError(
        provider,
        "invalid_message",
        `headers for "${destination}" must be an object of string values`,
      );
    }
    const given = message.headers as Record<string, unknown>;
    for (const key in given) {
      if (!Object.hasOwn(given, key)) continue;
      const value = given[key];
      if (typeof value !== "string") {
        throw invalidInputError(
          provider,
          "invalid_message",
          `header "${key}" for "${destination}" must be a string, got ${typeof value}: convert it with String()`,
        );
      }
      if (reserved?.test(key)) {
        throw invalidInputError(
          provider,
          "invalid_message",
          `header "${key}" for "${destination}" is reserved by ${reserved.by}; rename it`,
        );
      }
      if (key === PUBLISHED_AT_HEADER && keep) {
        carried ??= {};
        carried[key] = value;
      } else if (IDENTITY_HEADERS.has(key)) {
        // A caller-set x-priority without message.priority passes through as user data when kept.
        if (key === Headers.priority && keep) headers[key] = value;
        else if (keep) {
          carried ??= {};
          carried[key] = value;
        }
      } else {
        headers[key] = value;
      }
    }
  }
  const id =
    optionalString(provider, message.id, "id", destination) ??
    carried?.[Headers.messageId] ??
    (options.newId === undefined ? globalThis.crypto.randomUUID() : options.newId());
  const correlationId =
    optionalString(provider, message.correlationId, "correlationId", destination) ??
    carried?.[Headers.correlationId] ??
    id;
  const executionId =
    optionalString(provider, message.executionId, "executionId", destination) ??
    carried?.[Headers.executionId];
  const traceparent =
    optionalString(provider, message.traceparent, "traceparent", destination) ??
    carried?.[Headers.traceparent];
  const carriedAttempt = carried?.[Headers.deliveryAttempt];
  headers[Headers.messageId] = id;
  headers[Headers.correlationId] = correlationId;
  if (executionId !== undefined) headers[Headers.executionId] = executionId;
  if (traceparent !== undefined) headers[Headers.traceparent] = traceparent;
  if (priority !== undefined) headers[Headers.priority] = String(priority);
  const bodyJson = JSON.stringify(message.body);
  let bytes = utf8Length(bodyJson);
  for (const key in headers) bytes += utf8Length(key) + utf8Length(headers[key] as string);
  if (bytes > options.maxBytes) {
    throw invalidInputError(
      provider,
      "message_too_large",
      `message for "${destination}" is ${bytes} bytes (JSON body + headers), above the limit of ${options.maxBytes} (maxMessageBytes): store large payloads elsewhere (e.g. as artefacts) and send a reference, or raise maxMessageBytes`,
    );
  }
  return {
    id,
    correlationId,
    executionId,
    traceparent,
    priority,
    delayMs: delayMs ?? 0,
    attempt: carriedAttempt === undefined ? 1 : parseAttempt(carriedAttempt),
    publishedAt: carried?.[PUBLISHED_AT_HEADER] ?? isoTime(options.now ?? Date.now()),
    headers,
    bodyJson,
    bytes,
  };
}

/** A 1-based attempt number from its header text; anything that is not a positive integer is 1. */
export function parseAttempt(text: string | undefined): number {
  if (text === undefined) return 1;
  const parsed = Number.parseInt(text, 10);
  return Number.isFinite(parsed) && parsed >= 1 ? parsed : 1;
}
