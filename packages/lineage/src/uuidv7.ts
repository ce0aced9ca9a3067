import { v7 } from "uuid";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Returns a new UUIDv7 (RFC 9562) from the `uuid` package: 48 bits of Unix milliseconds, then a
 * counter and random bits. Without `now`, ids made by one process sort in creation order (the
 * counter orders ids of the same millisecond), which keeps B-tree inserts at the right edge of the
 * index and lets executions be listed by id. With `now`, the id carries that millisecond.
 */
export function uuidv7(now?: number): string {
  return now === undefined ? v7() : v7({ msecs: now });
}

/** True when `value` is a UUID in its canonical 8-4-4-4-12 hex form (any version). */
export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID.test(value);
}
