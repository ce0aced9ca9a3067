import { describe, expect, it } from "vitest";
import { errorText, NETWORK_ERROR_CODES } from "../src/index.js";

describe("native errors", () => {
  it("knows the network codes and reads any thrown value as text", () => {
    expect(NETWORK_ERROR_CODES.has("ECONNREFUSED")).toBe(true);
    expect(NETWORK_ERROR_CODES.has("ENOENT")).toBe(false);
    expect(errorText(new Error("boom"))).toBe("boom");
    expect(errorText("s")).toBe("s");
    expect(errorText({ a: 1 })).toBe('{"a":1}');
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    expect(errorText(cyclic)).toBe("[object Object]");
  });
});
