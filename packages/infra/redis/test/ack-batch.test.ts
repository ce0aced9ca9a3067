import { describe, expect, it } from "vitest";
import { AckBatcher } from "../src/ack-batch.js";

describe("AckBatcher", () => {
  it("sends the acknowledgements of one turn as one call and answers each with its own code", async () => {
    const calls: string[][] = [];
    const batcher = new AckBatcher(async (ids) => {
      calls.push([...ids]);
      return ids.map((id) => (id === "2-0" ? 0 : 1));
    });
    const codes = await Promise.all(["1-0", "2-0", "3-0"].map((id) => batcher.ack(id)));
    expect(calls).toEqual([["1-0", "2-0", "3-0"]]);
    expect(codes).toEqual([1, 0, 1]);
    // A later turn makes a call of its own.
    expect(await batcher.ack("4-0")).toBe(1);
    expect(calls).toHaveLength(2);
  });

  it("rejects every member of a failed call, so each can retry", async () => {
    let fail = true;
    const batcher = new AckBatcher(async (ids) => {
      if (fail) throw new Error("Connection is closed.");
      return ids.map(() => 1);
    });
    const results = await Promise.allSettled([batcher.ack("1-0"), batcher.ack("2-0")]);
    expect(results.map((r) => r.status)).toEqual(["rejected", "rejected"]);
    fail = false;
    expect(await batcher.ack("1-0")).toBe(1);
  });

  it("splits a very long turn into calls of at most 500", async () => {
    const sizes: number[] = [];
    const batcher = new AckBatcher(async (ids) => {
      sizes.push(ids.length);
      return ids.map(() => 1);
    });
    await Promise.all(Array.from({ length: 1_200 }, (_, i) => batcher.ack(`${i}-0`)));
    expect(sizes).toEqual([500, 500, 200]);
  });
});
