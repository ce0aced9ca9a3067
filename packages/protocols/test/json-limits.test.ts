import { describe, expect, it } from "vitest";
import { findJsonHazard } from "../src/index.js";

describe("findJsonHazard", () => {
  it("accepts plain JSON, including well-formed astral characters", () => {
    expect(findJsonHazard({ a: [1, "x", null, true, { b: "💩 ü" }] })).toBeUndefined();
  });

  it("names the path of a NUL or a lone surrogate, in values and keys", () => {
    expect(findJsonHazard({ a: [0, "x\u0000"] })).toMatchObject({ path: "$.a[1]", kind: "nul" });
    expect(findJsonHazard({ a: { "b\u0000": 1 } })).toMatchObject({ kind: "nul" });
    expect(findJsonHazard({ a: "\ud800" })).toMatchObject({ path: "$.a", kind: "surrogate" });
    expect(findJsonHazard({ a: "x\udc00" })).toMatchObject({ kind: "surrogate" });
    expect(findJsonHazard({ "odd key": "\udc00" })?.path).toBe('$["odd key"]');
    // A lone half after a whole pair, and a pair in the wrong order, are still lone surrogates.
    expect(findJsonHazard({ a: ["💩\ud800"] })).toMatchObject({ path: "$.a[0]", kind: "surrogate" });
    expect(findJsonHazard(["\udca9\ud83d"])).toMatchObject({ path: "$[0]", kind: "surrogate" });
  });

  it("stops at the depth limit without recursion, whatever the nesting", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const hazard = findJsonHazard(deep, { maxDepth: 64 });
    expect(hazard).toMatchObject({ kind: "depth" });
    expect(hazard?.message).toMatch(/more than 64 levels/);
    expect(findJsonHazard([[[1]]], { maxDepth: 3 })).toBeUndefined();
    expect(findJsonHazard([[[[1]]]], { maxDepth: 3 })).toMatchObject({ path: "$[0][0][0]" });
  });

  it("stops a cycle at the depth limit and an expansion at the value budget", () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(findJsonHazard(cyclic)).toMatchObject({ kind: "depth" });
    const shared = Array.from({ length: 100 }, () => 1);
    const wide = Array.from({ length: 100 }, () => shared);
    expect(findJsonHazard(wide, { maxNodes: 5000 })).toMatchObject({ kind: "size" });
    expect(findJsonHazard(wide, { maxNodes: 20_000 })).toBeUndefined();
  });
});
