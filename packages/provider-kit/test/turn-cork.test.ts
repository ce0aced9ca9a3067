import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { TurnCork } from "../src/turn-cork.js";

describe("TurnCork", () => {
  it("corks at the first write of a turn and uncorks once the turn is over, writes in order", async () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk.toString()));
    const cork = new TurnCork(stream);
    for (const frame of ["a", "b", "c"]) {
      cork.beforeWrite();
      stream.write(frame);
    }
    // One cork for the whole turn, however many frames.
    expect(stream.writableCorked).toBe(1);
    // Promise reactions of the same turn still join the corked burst.
    await Promise.resolve();
    cork.beforeWrite();
    stream.write("d");
    expect(stream.writableCorked).toBe(1);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(stream.writableCorked).toBe(0);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(chunks.join("")).toBe("abcd");
    // The next turn corks again.
    cork.beforeWrite();
    expect(stream.writableCorked).toBe(1);
  });
});
