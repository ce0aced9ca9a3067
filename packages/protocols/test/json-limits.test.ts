import { describe, expect, it } from "vitest";
import { findJsonHazard, JsonHazardWalk } from "../src/index.js";

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

describe("JsonHazardWalk", () => {
  /** Walks `value` `values` at a time; returns how many calls it took and what it found. */
  function walkInSteps(value: unknown, values: number, limits = {}) {
    const walk = new JsonHazardWalk(value, limits);
    let calls = 1;
    while (!walk.advance(values)) calls++;
    return { calls, hazard: walk.hazard };
  }

  it("finds in small steps exactly what findJsonHazard finds in one", () => {
    const items = Array.from({ length: 5000 }, (_, index) => ({ index, name: `item ${index}` }));
    const safe = walkInSteps({ items }, 100);
    expect(safe.hazard).toBeUndefined();
    // 5000 objects of two values each, 100 values a call.
    expect(safe.calls).toBeGreaterThan(140);

    const late = structuredClone(items);
    (late[4321] as { name: string }).name = "bad\u0000";
    const found = walkInSteps({ items: late }, 100);
    expect(found.hazard).toEqual(findJsonHazard({ items: late }));
    expect(found.hazard).toMatchObject({ kind: "nul", path: "$.items[4321].name" });

    const wide = Array.from({ length: 100 }, () => Array.from({ length: 100 }, () => 1));
    expect(walkInSteps(wide, 7, { maxNodes: 5000 }).hazard).toMatchObject({ kind: "size" });
    expect(walkInSteps(wide, 7, { maxNodes: 20_000 }).hazard).toBeUndefined();
  });

  it("ends at once after a hazard and stays ended", () => {
    const walk = new JsonHazardWalk(["ok", "\ud800", ...Array.from({ length: 1000 }, () => "x")]);
    expect(walk.advance(1)).toBe(false);
    expect(walk.advance(2)).toBe(true);
    expect(walk.hazard).toMatchObject({ kind: "surrogate", path: "$[1]" });
    expect(walk.advance(10)).toBe(true);
    expect(walk.hazard).toMatchObject({ path: "$[1]" });
  });
});
