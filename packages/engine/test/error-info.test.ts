import { FactflowError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { errorInfoOf } from "../src/lineage/lineage-rows.js";

describe("the error a lineage row keeps", () => {
  it("keeps a thrown Error's stack, cut at 8,000 characters", () => {
    const thrown = new TypeError("bad input");
    const info = errorInfoOf(thrown);
    expect(info).toMatchObject({ class: "TypeError", message: "bad input", retryable: true, fatal: false });
    expect(info.stack).toBe(thrown.stack);
    expect(info.stack).toContain("error-info.test.ts");

    const deep = Object.assign(new Error("deep"), {
      stack: `Error: deep\n${"    at f (x.js:1:1)\n".repeat(1000)}`,
    });
    expect(errorInfoOf(deep).stack).toHaveLength(8001);
  });

  it("has no stack for a thrown non-Error, and keeps a FactflowError's retryable", () => {
    expect(errorInfoOf("plain text")).toEqual({
      class: "string",
      message: "plain text",
      retryable: true,
      fatal: false,
    });
    const refused = new FactflowError("invalid_argument", "no", { retryable: false });
    expect(errorInfoOf(refused)).toMatchObject({ retryable: false, stack: expect.stringContaining("no") });
  });
});
