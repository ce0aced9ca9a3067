import { HandlerTimeoutError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { DeadlineSweep, type Expiring, HandlerRun } from "../src/index.js";

function entry(inMs: number, expired: string[], name: string): Expiring {
  return { deadline: Date.now() + inMs, expire: () => expired.push(name) };
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 2_000 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

describe("DeadlineSweep", () => {
  it("expires entries whose deadline passed, in deadline order, and never one removed in time", async () => {
    const sweep = new DeadlineSweep<Expiring>();
    const expired: string[] = [];
    const late = entry(60, expired, "late");
    const early = entry(20, expired, "early");
    const removed = entry(10, expired, "removed");
    sweep.add(late);
    sweep.add(early);
    sweep.add(removed);
    sweep.delete(removed);
    await until(() => expired.length === 2);
    expect(expired).toEqual(["early", "late"]);
    expect([...sweep.values()]).toEqual([]);
  });

  it("lists what is still running, and an entry added while it sweeps is watched too", async () => {
    const sweep = new DeadlineSweep<Expiring>();
    const expired: string[] = [];
    const chained: Expiring = {
      deadline: Date.now() + 10,
      expire: () => {
        expired.push("first");
        sweep.add(entry(10, expired, "added by expire"));
      },
    };
    const waiting = entry(60_000, expired, "waiting");
    sweep.add(chained);
    sweep.add(waiting);
    expect([...sweep.values()]).toEqual([chained, waiting]);
    await until(() => expired.length === 2);
    expect(expired).toEqual(["first", "added by expire"]);
    sweep.delete(waiting); // the last one: the timer is cleared, nothing keeps the process alive
    expect([...sweep.values()]).toEqual([]);
  });

  it("clear removes every entry so none expires, and returns them for a stop to abort", async () => {
    const sweep = new DeadlineSweep<HandlerRun>();
    const runs = [new HandlerRun(15), new HandlerRun(20)];
    for (const run of runs) sweep.add(run);
    expect(sweep.clear()).toEqual(runs);
    expect([...sweep.values()]).toEqual([]);
    const later = new HandlerRun(15);
    sweep.add(later); // the sweep still works after a clear
    await until(() => later.controller.signal.aborted);
    for (const run of runs) expect(run.controller.signal.aborted).toBe(false);
  });

  it("HandlerRun aborts its signal with a HandlerTimeoutError when its timeout passes", async () => {
    const sweep = new DeadlineSweep<HandlerRun>();
    const run = new HandlerRun(15);
    const finished = new HandlerRun(15);
    sweep.add(run);
    sweep.add(finished);
    sweep.delete(finished);
    await until(() => run.controller.signal.aborted);
    expect(run.controller.signal.reason).toBeInstanceOf(HandlerTimeoutError);
    expect(finished.controller.signal.aborted).toBe(false);
  });
});
