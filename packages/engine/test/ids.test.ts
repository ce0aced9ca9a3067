import { createHash } from "node:crypto";
import type { JsonValue } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { canonicalJson, childMessageId, hashJson, newId } from "../src/ids.js";
import { timeOrderedUuid } from "../src/uuid-text.js";

describe("input hashes", () => {
  it("are the sha256 hex of the canonical JSON, whatever the key order", () => {
    const value = { b: [1, { y: "ü", x: null }], a: 'q"uote', c: true };
    const expected = createHash("sha256").update(canonicalJson(value)).digest("hex");
    expect(canonicalJson(value)).toBe('{"a":"q\\"uote","b":[1,{"x":null,"y":"ü"}],"c":true}');
    expect(hashJson(value)).toBe(expected);
    expect(hashJson({ c: true, a: 'q"uote', b: [1, { x: null, y: "ü" }] })).toBe(expected);
    expect(hashJson(null)).toBe(createHash("sha256").update("null").digest("hex"));
  });
});

/** The canonical JSON as earlier releases spelled it out: the reference the hashes must keep. */
function reference(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) as string;
  // Concatenated like the release did: a member that is not JSON reads "undefined".
  if (Array.isArray(value)) return `[${value.map((member) => `${reference(member)}`).join(",")}]`;
  const record = value as Record<string, unknown>;
  return `{${Object.keys(record)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${reference(record[k])}`)
    .join(",")}}`;
}

describe("canonical JSON", () => {
  it("is the same text as before whatever the shape: ordered or not, nested, integer-like keys", () => {
    const values: unknown[] = [
      { a: 1, b: "two", c: [true, null, { d: 1.5, e: -0 }] },
      { b: 1, a: 2 },
      { "1": "x", "2": "y", "10": "z", a: { z: 1, y: [2, { q: 'ü\u2028"' }] } },
      [{ x: 1 }, [{ y: [] }, {}], "s", 3e21, -1e-7],
      JSON.parse('{"__proto__": {"b": 1}, "a": 0}'),
      { nested: { deeper: { deepest: { a: "\ud800", b: "\n" } } } },
      "plain",
      42,
      null,
    ];
    for (const value of values) {
      expect(canonicalJson(value as JsonValue)).toBe(reference(value));
      expect(hashJson(value as JsonValue)).toBe(createHash("sha256").update(reference(value)).digest("hex"));
    }
  });

  it("reorders plain JSON whose keys are out of order, with the same text as before", () => {
    const values: unknown[] = [
      { item: 1, index: 0 },
      { item: { z: [1, { b: 2, a: 1 }], y: null }, index: 3, seen: true },
      [{ b: 1, a: 2 }, { a: 1 }, [{ d: 4, c: 3 }]],
      // Out of order beside an integer-like key: no object can hold "10" before "2".
      { b: 1, "2": "x", "10": "y", a: 0 },
      JSON.parse('{"z": 1, "__proto__": {"b": 1, "a": 2}, "a": 0}'),
      { z: { "01": 1, "1": 2, a: 3 }, a: [] },
      { b: { toJSON: () => "no" }, a: 1 },
      { b: [Number.POSITIVE_INFINITY], a: 1 },
    ];
    for (const value of values) expect(canonicalJson(value as JsonValue)).toBe(reference(value));
    const shared = { b: 1, a: 2 };
    const input = { y: shared, x: [shared] };
    canonicalJson(input as JsonValue);
    // The caller's value is read, never reordered in place.
    expect(Object.keys(shared)).toEqual(["b", "a"]);
    expect(Object.keys(input)).toEqual(["y", "x"]);
  });

  it("keeps the spelled-out text for values that are not plain JSON", () => {
    // Not JSON, but adapters may return them: their hashes must not change either.
    const odd: unknown[] = [{ a: undefined }, [undefined], { d: new Date(0) }, { n: Number.NaN }];
    for (const value of odd) expect(canonicalJson(value as JsonValue)).toBe(reference(value));
  });
});

describe("message and row ids", () => {
  it("derive child ids exactly as earlier releases did, so a redelivery after an upgrade meets the same ids", () => {
    // Values computed by the release before ids were formatted through a scratch buffer.
    expect(childMessageId("019a1b2c-3d4e-7f00-8abc-def012345678", "hop1", "hop2.in", 0)).toBe(
      "38a245f4-d8a9-8996-8b8e-49559a03d95f",
    );
    expect(childMessageId("a", "b", "c", 7)).toBe("9cd72042-b674-8135-ae8e-62c68d708dcb");
    expect(
      childMessageId(
        "019a1b2c-3d4e-7f00-8abc-def012345678+019a1b2c-3d4e-7f00-8abc-def012345679",
        "seed",
        "hop1.in",
        19999,
      ),
    ).toBe("83fd228a-675f-845f-bf58-286c63eb81bc");
  });

  it("give child ids the version 8 layout of the sha256 of their inputs", () => {
    for (let index = 0; index < 2000; index++) {
      const id = childMessageId(`parent-${index}`, "route", "queue", index);
      const hex = createHash("sha256")
        .update(`factflow/child\u0000parent-${index}\u0000route\u0000queue\u0000${index}`)
        .digest("hex");
      const variant = ((Number.parseInt(hex.slice(16, 18), 16) & 0x3f) | 0x80).toString(16);
      expect(id).toBe(
        `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(18, 20)}-${hex.slice(20, 32)}`,
      );
    }
  });

  it("make row ids as distinct version 7 UUIDs that start with the millisecond they were made", () => {
    const seen = new Set<string>();
    const before = Date.now();
    // More than one refill of the random pool.
    for (let i = 0; i < 5000; i++) {
      const id = newId();
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      seen.add(id);
    }
    const after = Date.now();
    expect(seen.size).toBe(5000);
    for (const id of seen) {
      const ms = Number.parseInt(id.replace("-", "").slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
    }
  });

  it("sort ids made in later milliseconds after earlier ones (what keeps index inserts together)", () => {
    const ms = Date.UTC(2026, 0, 1);
    const early = timeOrderedUuid(ms);
    const late = timeOrderedUuid(ms + 1);
    expect(early < late).toBe(true);
    expect(early.replace("-", "").slice(0, 12)).toBe(ms.toString(16).padStart(12, "0"));
  });
});
