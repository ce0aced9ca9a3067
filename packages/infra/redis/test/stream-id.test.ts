import { describe, expect, it } from "vitest";
import { settleAcksArgs, streamIdBefore } from "../src/scripts.js";

describe("stream entry ids", () => {
  it("orders ids by time, then sequence, as numbers", () => {
    expect(streamIdBefore("1700000000000-0", "1700000000001-0")).toBe(true);
    expect(streamIdBefore("1700000000000-9", "1700000000000-10")).toBe(true);
    expect(streamIdBefore("1700000000000-10", "1700000000000-9")).toBe(false);
    expect(streamIdBefore("1700000000001-0", "1700000000000-25")).toBe(false);
    expect(streamIdBefore("1700000000000-25", "1700000000001-0")).toBe(true);
    expect(streamIdBefore("999-5", "1000-0")).toBe(true);
    expect(streamIdBefore("1000-0", "999-5")).toBe(false);
    expect(streamIdBefore("5-5", "5-5")).toBe(false);
  });

  it("hands SETTLE_ACKS the lowest and highest id of a batch in any order", () => {
    const ids = ["1700000000001-0", "1700000000000-10", "1700000000002-3", "1700000000000-9"];
    expect(settleAcksArgs("g", "c", ids)).toEqual(["g", "c", "1700000000000-9", "1700000000002-3", ...ids]);
    expect(settleAcksArgs("g", "c", ["1-1"])).toEqual(["g", "c", "1-1", "1-1", "1-1"]);
  });
});
