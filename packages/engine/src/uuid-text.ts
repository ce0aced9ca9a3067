import { randomFillSync } from "node:crypto";

/**
 * UUID strings made in one piece. Building a UUID by concatenating slices (as `crypto.randomUUID`
 * does, and as child ids did) makes a chain of ~20 string fragments that V8 copies into one flat
 * string again the first time the id is hashed as a map key; the hot path makes two ids per hop and
 * looks both up. Here the 36 characters are written into a scratch buffer and read out as one flat
 * Latin-1 string.
 */
const scratch = Buffer.alloc(36);
const DASH = 0x2d;
scratch[8] = DASH;
scratch[13] = DASH;
scratch[18] = DASH;
scratch[23] = DASH;

/** Character codes of the hex digits, by value. */
const HEX_CODES = Uint8Array.from("0123456789abcdef", (c) => c.charCodeAt(0));
/** Positions in the 36-character text of the 32 hex digits, in order. */
const DIGIT_AT = Uint8Array.from(
  { length: 32 },
  (_, i) => i + (i >= 8 ? 1 : 0) + (i >= 12 ? 1 : 0) + (i >= 16 ? 1 : 0) + (i >= 20 ? 1 : 0),
);

/**
 * The UUID (RFC 9562 layout, `version` 1–8) made of the first 32 hex digits of `hex` (lowercase),
 * with the version digit and the variant bits set.
 */
export function uuidFromHex(hex: string, version: number): string {
  for (let i = 0; i < 32; i++) scratch[DIGIT_AT[i] as number] = hex.charCodeAt(i);
  scratch[14] = HEX_CODES[version] as number;
  // Variant 10xx: the 17th digit keeps its two low bits.
  scratch[19] = HEX_CODES[(digitValue(hex.charCodeAt(16)) & 0x3) | 0x8] as number;
  return scratch.toString("latin1", 0, 36);
}

function digitValue(code: number): number {
  return code <= 0x39 ? code - 0x30 : code - 0x57;
}

/** Random bytes for {@link timeOrderedUuid}, refilled 256 UUIDs at a time. */
const pool = Buffer.alloc(16 * 256);
let poolOffset = pool.length;

/**
 * A version 7 UUID (RFC 9562): the millisecond `now` in its first 48 bits, 74 random bits after
 * it. Ids made one after another land next to each other in a B-tree index (a random UUID lands
 * anywhere, so every insert into a large index touches a page that is likely out of the cache).
 * Ids of the same millisecond are not ordered among themselves; nothing relies on that.
 */
export function timeOrderedUuid(now: number = Date.now()): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += 16;
  // 48 bits of milliseconds, most significant digit first: twelve hex digits.
  let ms = now;
  for (let i = 11; i >= 0; i--) {
    scratch[DIGIT_AT[i] as number] = HEX_CODES[ms % 16] as number;
    ms = Math.floor(ms / 16);
  }
  for (let i = 6; i < 16; i++) {
    const byte = pool[at + i] as number;
    scratch[DIGIT_AT[2 * i] as number] = HEX_CODES[byte >> 4] as number;
    scratch[DIGIT_AT[2 * i + 1] as number] = HEX_CODES[byte & 0xf] as number;
  }
  scratch[14] = HEX_CODES[7] as number;
  scratch[19] = HEX_CODES[(((pool[at + 8] as number) >> 4) & 0x3) | 0x8] as number;
  return scratch.toString("latin1", 0, 36);
}
