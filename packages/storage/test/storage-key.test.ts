import { describe, expect, it } from "vitest";
import { assertValidKey, keyProblem } from "../src/index.js";

describe("artefact keys", () => {
  it.each(["a", "exec-1/parse/out.json", "a/b/c/d.e.f", "with space/ünïcode.txt", "a/.hidden", "a/%41.txt"])(
    "accepts %j",
    (key) => {
      expect(keyProblem(key)).toBeUndefined();
    },
  );

  it.each([
    ["", /empty/],
    ["/etc/passwd", /absolute/],
    ["a/../b", /"\.\." segment/],
    ["..", /"\.\." segment/],
    ["./a", /"\." segment/],
    ["a//b", /empty segment/],
    ["a/", /empty segment/],
    ["a%2fb", /encoded slash/],
    ["a%2Fb", /encoded slash/],
    ["a%5cb", /encoded slash/],
    ["a/%2e%2e/b", /encoded \. or \.\./],
    ["a\\b", /backslash/],
    ["a\0b", /NUL/],
    ["C:/x", /drive letter/],
    [".sidecars/x", /reserved for sidecars/],
    ["a/.~tmp-x", /temp files/],
    ["x".repeat(1025), /longer than/],
  ])("rejects %j", (key, reason) => {
    expect(keyProblem(key)).toMatch(reason);
    expect(() => assertValidKey(key)).toThrow(
      expect.objectContaining({
        code: "storage_key_invalid",
        message: expect.stringContaining("[factflow/storage]"),
      }),
    );
  });
});
