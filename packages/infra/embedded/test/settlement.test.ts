import { describe, expect, it } from "vitest";
import { decide } from "../src/settlement.js";

describe("settlement rules", () => {
  it("acks, rejects, retries and exhausts by status, attempt and destination kind", () => {
    expect(decide({ result: "ACKNOWLEDGED" }, 1, 3, false)).toEqual({ kind: "ack" });
    expect(decide({ result: { status: "REJECTED", reason: "bad" } }, 1, 3, false)).toEqual({
      kind: "dead",
      reason: "rejected",
      lastError: "bad",
    });
    expect(decide({ result: "FAILED" }, 2, 3, false)).toEqual({
      kind: "retry",
      lastError: "handler returned FAILED",
      incomplete: false,
    });
    expect(decide({ result: "FAILED" }, 3, 3, false)).toMatchObject({ kind: "dead", reason: "exhausted" });
    expect(decide({ result: "FAILED" }, 1, 3, true)).toMatchObject({ kind: "dead", reason: "topic-failure" });
  });

  it("treats throws, internal statuses and garbage as incomplete, within the budget", () => {
    for (const result of ["PENDING", "DELIVERED", "EXPIRED", 42, undefined, { status: "nope" }]) {
      expect(decide({ result: result as never }, 1, 3, false)).toMatchObject({
        kind: "retry",
        incomplete: true,
      });
      expect(decide({ result: result as never }, 3, 3, false)).toMatchObject({
        kind: "dead",
        reason: "incomplete",
      });
    }
    expect(decide({ thrown: new TypeError("x is undefined") }, 1, 2, false)).toEqual({
      kind: "retry",
      lastError: "handler threw TypeError: x is undefined",
      incomplete: true,
    });
  });
});
