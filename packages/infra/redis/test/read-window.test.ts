import { describe, expect, it } from "vitest";
import { type ReadWindowState, readCount } from "../src/read-window.js";

const base: ReadWindowState = {
  prefetch: 10,
  concurrency: 8,
  unsettled: 0,
  waiting: 0,
  running: 0,
  refilling: false,
};

describe("readCount", () => {
  it("asks for the free part of the window, never beyond prefetch", () => {
    expect(readCount(base)).toBe(10);
    expect(readCount({ ...base, unsettled: 6, running: 6 })).toBe(4);
    expect(readCount({ ...base, unsettled: 10, running: 8, waiting: 2 })).toBe(0);
    expect(readCount({ ...base, unsettled: 10, running: 7, refilling: true })).toBe(0);
  });

  it("once the window was full, waits for half of it while every handler has work", () => {
    const busy = { ...base, refilling: true, running: 8 };
    expect(readCount({ ...busy, unsettled: 9, waiting: 1 })).toBe(0);
    expect(readCount({ ...busy, unsettled: 8 })).toBe(0);
    expect(readCount({ ...busy, unsettled: 5, running: 5 })).toBe(5);
  });

  it("reads at once when a handler is free with nothing to run, however full the window", () => {
    // Seven deliveries held unsettled (a partial batch), three settled: the eighth handler is free.
    expect(readCount({ ...base, refilling: true, unsettled: 7, running: 7 })).toBe(3);
    expect(readCount({ ...base, refilling: true, unsettled: 9, running: 7, waiting: 0 })).toBe(1);
    // A free handler but deliveries waiting for it: nothing to read for.
    expect(readCount({ ...base, refilling: true, unsettled: 9, running: 7, waiting: 2 })).toBe(0);
  });
});
