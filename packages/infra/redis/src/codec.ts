import { Headers, type JsonValue, type MessageEnvelope } from "@factflow/protocols";
import { envelopeFromHeaders } from "@factflow/provider-kit";

/** Stream entry field holding the JSON body. */
export const BODY_FIELD = "b";
/** Stream entry field holding the headers as one JSON object of strings. */
export const HEADERS_FIELD = "h";
/** Stream entry field set on a hand-back copy: the message was handed out before. */
export const REDELIVERED_FIELD = "r";

/** The fields of a stream entry, as stored. */
export interface RawEntry {
  readonly bodyJson: string;
  readonly headersJson: string;
  /** A hand-back copy (field `r`): delivered again, flagged redelivered. */
  readonly handedBack: boolean;
}

/** Reads the `b` / `h` / `r` fields of an entry's flat `[field, value, ...]` list. */
export function rawEntry(fields: readonly string[]): RawEntry {
  let bodyJson = "null";
  let headersJson = "{}";
  let handedBack = false;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] === BODY_FIELD) bodyJson = fields[i + 1] as string;
    else if (fields[i] === HEADERS_FIELD) headersJson = fields[i + 1] as string;
    else if (fields[i] === REDELIVERED_FIELD) handedBack = true;
  }
  return { bodyJson, headersJson, handedBack };
}

/** Parses the headers JSON; undefined when it is not an object of strings. */
export function parseHeaders(headersJson: string): Record<string, string> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(headersJson);
  } catch {
    return undefined;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
  for (const value of Object.values(parsed)) if (typeof value !== "string") return undefined;
  return parsed as Record<string, string>;
}

/** A decoded entry: the envelope and attempt, or why it is not a Factflow message. */
export type Decoded =
  | { readonly envelope: MessageEnvelope; readonly attempt: number }
  | { readonly error: string; readonly headers: Record<string, string> };

/** Decodes a stream entry into the envelope a handler receives. `entryId` stands in for a missing id. */
export function decodeEntry(raw: RawEntry, entryId: string): Decoded {
  const headers = parseHeaders(raw.headersJson);
  if (headers === undefined) {
    return {
      error: "its headers are not a JSON object of strings",
      headers: { [Headers.messageId]: entryId },
    };
  }
  let body: JsonValue;
  try {
    body = JSON.parse(raw.bodyJson) as JsonValue;
  } catch {
    return { error: "its body is not JSON", headers };
  }
  return envelopeFromHeaders(headers, body, { id: entryId });
}

/** The body of a stored entry for display: parsed JSON, or the raw text when it is not JSON. */
export function bodyForDisplay(bodyJson: string): JsonValue {
  try {
    return JSON.parse(bodyJson) as JsonValue;
  } catch {
    return bodyJson;
  }
}
