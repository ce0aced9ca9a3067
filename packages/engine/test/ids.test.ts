import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { canonicalJson, hashJson } from "../src/ids.js";

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
