import * as crypto from "node:crypto";
import { createHash } from "node:crypto";
import type { JsonValue } from "@factflow/protocols";
import { v7 } from "uuid";
import { timeOrderedUuid, uuidFromHex } from "./uuid-text.js";

/**
 * A UUIDv7 (RFC 9562, time-ordered) from the `uuid` package, used for execution ids so they sort by
 * creation time. Without `now` the ids of one process are monotonic (a counter orders ids made in the
 * same millisecond); with `now` the id carries that millisecond and random bits after it.
 */
export function uuidv7(now?: number): string {
  return now === undefined ? v7() : v7({ msecs: now });
}

/**
 * A time-ordered UUID (version 7) for adapter lineage rows and new root messages. Lineage rows are
 * keyed by it: with random ids every insert went to a random page of the primary-key index, and once
 * that index outgrew PGlite's buffer cache the embedded relay slowed with every round. Made here
 * rather than by {@link uuidv7}: like the random ids before, it is written as one flat string from
 * a pooled random buffer (uuid-text.ts), on the path that makes a row id every hop.
 */
export function newId(): string {
  return timeOrderedUuid();
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
  return uuidFromHex(hex, 8);
}

/** JSON with object keys sorted, so equal values hash equally whatever their key order. */
export function canonicalJson(value: JsonValue): string {
  // Most values are built with their keys in order already: then the native serialiser gives the
  // same text, in one flat string, far faster than the concatenation below.
  if (isInCanonicalOrder(value, 0)) return JSON.stringify(value);
  // Plain JSON whose only fault is key order (`{ item, index }`): the native serialiser again, on
  // a copy with its keys in order.
  const ordered = inKeyOrder(value, 0);
  if (ordered !== NOT_PLAIN) return JSON.stringify(ordered);
  return spelledOut(value);
}

/** {@link inKeyOrder}'s answer for a value the native serialiser would not spell as before. */
const NOT_PLAIN: unique symbol = Symbol("not plain JSON");

/** Keys an object lists first, in ascending numeric order, whatever order they were added in. */
const INDEX_KEY = /^(?:0|[1-9][0-9]*)$/;

/**
 * `value` with every object's keys in sorted order (objects already in order are kept as they
 * are), or {@link NOT_PLAIN} when `JSON.stringify` of that would not be its historical text: a value
 * {@link isInCanonicalOrder} refuses for another reason than key order, or an object to reorder
 * that has an integer-like key (a JavaScript object always lists those first, in numeric order, so
 * no object can hold them in string order).
 */
function inKeyOrder(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== "object")
    return isInCanonicalOrder(value, depth) ? value : NOT_PLAIN;
  if (depth > 64) return NOT_PLAIN;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const member = inKeyOrder(value[i], depth + 1);
      if (member === NOT_PLAIN) return NOT_PLAIN;
      if (member !== value[i]) {
        copy ??= value.slice();
        copy[i] = member;
      }
    }
    return copy ?? value;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return NOT_PLAIN;
  const record = value as Record<string, unknown>;
  const keys: string[] = [];
  let sorted = true;
  let changed = false;
  const members: Record<string, unknown> = Object.create(null);
  for (const key in record) {
    if (!Object.hasOwn(record, key)) return NOT_PLAIN;
    if (keys.length > 0 && (keys[keys.length - 1] as string) > key) sorted = false;
    keys.push(key);
    const member = inKeyOrder(record[key], depth + 1);
    if (member === NOT_PLAIN) return NOT_PLAIN;
    if (member !== record[key]) changed = true;
    members[key] = member;
  }
  if (sorted && !changed) return value;
  if (!sorted) {
    for (const key of keys) if (INDEX_KEY.test(key)) return NOT_PLAIN;
    keys.sort();
  }
  // No prototype: a "__proto__" key stays an ordinary member.
  const copy: Record<string, unknown> = Object.create(null);
  for (const key of keys) copy[key] = members[key];
  return copy;
}

/**
 * True when `JSON.stringify(value)` is its canonical JSON: plain objects whose own keys come in
 * sorted order (as `Array.prototype.sort` orders them), arrays, strings, finite numbers, booleans
 * and null all the way down (at most 64 levels). Anything else (`undefined`, a class instance, a
 * `toJSON`, a non-finite number) takes the spelled-out path, which keeps its historical text.
 */
function isInCanonicalOrder(value: unknown, depth: number): boolean {
  if (value === null) return true;
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "object": {
      if (depth > 64) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isInCanonicalOrder(value[i], depth + 1)) return false;
        return true;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype) return false;
      let previous: string | undefined;
      for (const key in value) {
        if (!Object.hasOwn(value, key)) return false;
        if (previous !== undefined && previous > key) return false;
        previous = key;
        if (!isInCanonicalOrder((value as Record<string, unknown>)[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function spelledOut(value: JsonValue): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  let out = "";
  if (Array.isArray(value)) {
    out = "[";
    for (let i = 0; i < value.length; i++) out += (i === 0 ? "" : ",") + spelledOut(value[i] as JsonValue);
    return `${out}]`;
  }
  const keys = Object.keys(value);
  // Most objects are built with their keys already in order: only sort the others.
  for (let i = 1; i < keys.length; i++) {
    if ((keys[i - 1] as string) > (keys[i] as string)) {
      keys.sort();
      break;
    }
  }
  out = "{";
  let first = true;
  for (const k of keys) {
    out += `${first ? "" : ","}${JSON.stringify(k)}:${spelledOut(value[k] as JsonValue)}`;
    first = false;
  }
  return `${out}}`;
}

let lastMs = -1;
let lastIso = "";

/**
 * `new Date().toISOString()`, formatted once per millisecond: the hot path stamps several lineage
 * timestamps per message, mostly within the same millisecond.
 */
export function nowIso(): string {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
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
