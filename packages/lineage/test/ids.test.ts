import { describe, expect, it } from "vitest";
import { isUuid, redactUrl, uuidv7 } from "../src/index.js";

describe("uuidv7", () => {
  it("makes version 7, variant 10 UUIDs that sort in creation order", () => {
    const ids = Array.from({ length: 5000 }, () => uuidv7());
    for (const id of ids) {
      expect(isUuid(id)).toBe(true);
      expect(id[14]).toBe("7");
      expect("89ab").toContain(id[19]);
    }
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("encodes the millisecond timestamp in the first 48 bits", () => {
    const id = uuidv7(Date.UTC(2030, 0, 1) + 10_000_000_000);
    const ms = Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
    expect(ms).toBeGreaterThanOrEqual(Date.UTC(2030, 0, 1) + 10_000_000_000);
  });

  it("rejects what is not a UUID", () => {
    for (const bad of [
      "",
      "abc",
      "0190a8e4-5f2c-7a00-8000-00000000000",
      "0190a8e4-5f2c-7a00-8000-0000000000000",
      "0190a8e45-f2c-7a00-8000-000000000000",
      "0190a8e4-5f2c-7a00-8000-00000000000g",
      "0190a8e4_5f2c-7a00-8000-000000000000",
      "'; drop table x; --",
      42,
      null,
    ]) {
      expect(isUuid(bad)).toBe(false);
    }
  });

  it("accepts the canonical form in either case", () => {
    expect(isUuid("0190a8e4-5f2c-7a00-8000-00000000abcd")).toBe(true);
    expect(isUuid("0190A8E4-5F2C-7A00-8000-00000000ABCD")).toBe(true);
  });
});

describe("redactUrl", () => {
  it("replaces the password and keeps the rest", () => {
    expect(redactUrl("postgres://app:hunter2@db.example:5432/factflow")).toBe(
      "postgres://app:<redacted>@db.example:5432/factflow",
    );
    expect(redactUrl("postgres://postgres@127.0.0.1:5432/postgres")).toBe(
      "postgres://postgres@127.0.0.1:5432/postgres",
    );
    expect(redactUrl("not a url with secret")).not.toContain("secret");
  });
});
