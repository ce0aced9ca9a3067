import * as crypto from "node:crypto";
import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { JsonValue } from "@factflow/protocols";

/** A UUIDv7 (time-ordered), used for execution ids so they sort by creation time. */
export function uuidv7(now = Date.now()): string {
  const bytes = randomBytes(16);
  // 48-bit big-endian millisecond timestamp.
  bytes[0] = Math.floor(now / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(now / 2 ** 32) & 0xff;
  bytes[2] = Math.floor(now / 2 ** 24) & 0xff;
  bytes[3] = Math.floor(now / 2 ** 16) & 0xff;
  bytes[4] = Math.floor(now / 2 ** 8) & 0xff;
  bytes[5] = now & 0xff;
  bytes[6] = ((bytes[6] ?? 0) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] ?? 0) & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A random UUIDv4 for lineage rows and messages. */
export function newId(): string {
  return randomUUID();
}

/**
 * The id of the `index`-th message a delivery of `parentId` sends to `queue` from `route`: a
 * sha256-derived UUID (RFC 9562 version 8 layout). A broker redelivers a message whose ack was lost
 * (connection cut, crash, abort); re-running it must republish the SAME child ids, so lineage upserts
 * the same rows and the children's own duplicates are recognised downstream instead of multiplying.
 */
export function childMessageId(parentId: string, route: string, queue: string, index: number): string {
  // NUL cannot occur in ids or queue names, so the fields cannot run into each other.
  const text = `factflow/child\u0000${parentId}\u0000${route}\u0000${queue}\u0000${index}`;
  const hex =
    oneShotHash === undefined
      ? createHash("sha256").update(text).digest("hex")
      : oneShotHash("sha256", text, "hex");
  const variant = ((Number.parseInt(hex.slice(16, 18), 16) & 0x3f) | 0x80).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(18, 20)}-${hex.slice(20, 32)}`;
}

/** JSON with object keys sorted, so equal values hash equally whatever their key order. */
export function canonicalJson(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] as JsonValue)}`).join(",")}}`;
}

type OneShotHash = (algorithm: string, data: string, encoding: "hex") => string;
const oneShotHash = (crypto as { hash?: OneShotHash }).hash;

/** sha256 hex of the canonical JSON of `value` (the lineage `inputHash`). */
export function hashJson(value: JsonValue): string {
  const text = canonicalJson(value);
  // The one-shot `crypto.hash` (Node ≥ 20.12) is about 3× cheaper than a Hash object per row.
  return oneShotHash === undefined
    ? createHash("sha256").update(text).digest("hex")
    : oneShotHash("sha256", text, "hex");
}
