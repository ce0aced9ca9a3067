import { v7 } from "uuid";

/**
 * Returns a new UUIDv7 (RFC 9562) from the `uuid` package: 48 bits of Unix milliseconds, then a
 * counter and random bits. Without `now`, ids made by one process sort in creation order (the
 * counter orders ids of the same millisecond), which keeps B-tree inserts at the right edge of the
 * index and lets executions be listed by id. With `now`, the id carries that millisecond.
 */
export function uuidv7(now?: number): string {
  return now === undefined ? v7() : v7({ msecs: now });
}

/**
 * True when `value` is a UUID in its canonical 8-4-4-4-12 hex form (any version, either case).
 * Every lineage write checks its ids, so this reads the characters itself rather than run a
 * case-insensitive regular expression.
 */
export function isUuid(value: unknown): value is string {
  if (typeof value !== "string" || value.length !== 36) return false;
  for (let i = 0; i < 36; i++) {
    const c = value.charCodeAt(i);
    if (i === 8 || i === 13 || i === 18 || i === 23) {
      if (c !== 45) return false; // "-"
    } else if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70))) {
      return false; // not 0-9, a-f or A-F
    }
  }
  return true;
}
