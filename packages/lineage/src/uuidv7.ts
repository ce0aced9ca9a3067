import { getRandomValues } from "node:crypto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

let lastMs = 0;
let counter = 0;

/**
 * Returns a new UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then a 12-bit counter and 62 random
 * bits. Ids made by one process sort in creation order, which keeps B-tree inserts at the right edge
 * of the index and lets executions be listed by id.
 */
export function uuidv7(now: number = Date.now()): string {
  // Within one millisecond the 12-bit counter keeps ids increasing; past 4095 ids in one
  // millisecond we borrow the next millisecond rather than lose monotonicity.
  if (now > lastMs) {
    lastMs = now;
    counter = 0;
  } else {
    counter++;
    if (counter > 0xfff) {
      lastMs++;
      counter = 0;
    }
  }
  const bytes = new Uint8Array(16);
  getRandomValues(bytes);
  let ms = lastMs;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | ((counter >> 8) & 0x0f);
  bytes[7] = counter & 0xff;
  bytes[8] = 0x80 | ((bytes[8] ?? 0) & 0x3f);
  const hex = Buffer.from(bytes).toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** True when `value` is a UUID in its canonical 8-4-4-4-12 hex form (any version). */
export function isUuid(value: unknown): value is string {
  return typeof value === "string" && UUID.test(value);
}
