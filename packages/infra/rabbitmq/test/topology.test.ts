import { describe, expect, it } from "vitest";
import { rememberBounded } from "../src/topology.js";

describe("rememberBounded", () => {
  it("evicts the oldest entries beyond the bound, keeping insertion order", () => {
    const set = new Set([1, 2, 3, 4, 5]);
    rememberBounded(set, 3);
    expect([...set]).toEqual([3, 4, 5]);
    const map = new Map([
      ["a", 1],
      ["b", 2],
    ]);
    rememberBounded(map, 5);
    expect([...map.keys()]).toEqual(["a", "b"]);
  });
});
