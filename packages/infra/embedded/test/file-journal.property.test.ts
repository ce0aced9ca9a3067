import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseEmbeddedConfig } from "../src/config.js";
import { FileJournal } from "../src/file-journal.js";
import type { JournalTimers, LogFile } from "../src/log-file.js";
import type { StoredMessage } from "../src/message.js";
import { LOG_MAGIC, RECORD_HEADER_BYTES } from "../src/record-codec.js";
import { recordingLogger } from "./helpers.js";

/**
 * The file journal under every interleaving fast-check's scheduler can produce: group-commit
 * wake-ups, appends, syncs and compactions complete in an order the property picks, while the
 * program appends, waits for commits, appends again from a commit's continuation, closes and reopens.
 * Nothing here sleeps: every step is a scheduled task.
 */

function payloads(parts: readonly Buffer[]): string[] {
  const out: string[] = [];
  for (const part of parts) {
    let offset = part.subarray(0, LOG_MAGIC.length).equals(LOG_MAGIC) ? LOG_MAGIC.length : 0;
    while (offset < part.length) {
      const length = part.readUInt32LE(offset);
      out.push(part.toString("utf8", offset + RECORD_HEADER_BYTES, offset + RECORD_HEADER_BYTES + length));
      offset += RECORD_HEADER_BYTES + length;
    }
  }
  return out;
}

/** A disk whose every operation completes when the scheduler lets it; holds decoded records. */
class ScheduledDisk implements LogFile {
  records: string[] = [];
  bytes = LOG_MAGIC.length;
  failNextAppend = false;
  constructor(private readonly s: fc.Scheduler) {}

  append(parts: readonly Buffer[]): Promise<void> {
    const data = Buffer.concat(parts);
    return this.s.schedule(Promise.resolve(), "append").then(() => {
      if (this.failNextAppend) {
        this.failNextAppend = false;
        throw Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
      }
      this.records.push(...payloads([data]));
      this.bytes += data.length;
    });
  }
  sync(): Promise<void> {
    return this.s.schedule(Promise.resolve(), "sync");
  }
  replace(parts: Iterable<Buffer>): Promise<void> {
    return this.s.schedule(Promise.resolve(), "replace").then(() => {
      const written = [...parts];
      this.records = payloads(written);
      this.bytes = written.reduce((n, part) => n + part.length, 0);
    });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

function scheduledTimers(s: fc.Scheduler): JournalTimers {
  return {
    schedule(fire) {
      let cancelled = false;
      void s.schedule(Promise.resolve(), "wake-up").then(() => {
        if (!cancelled) fire();
      });
      return () => {
        cancelled = true;
      };
    },
  };
}

type Op =
  | { kind: "append"; pad: number; again: number; hops: number; pause: number }
  | { kind: "settle"; pause: number }
  | { kind: "reopen"; pause: number }
  | { kind: "fail"; pause: number };

const pause = fc.nat({ max: 3 });
const opArb = (withFailures: boolean): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant("append" as const),
        pad: fc.nat({ max: 300 }),
        again: fc.nat({ max: 2 }),
        hops: fc.nat({ max: 4 }),
        pause,
      }),
    },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("settle" as const), pause }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("reopen" as const), pause }) },
    { weight: withFailures ? 1 : 0, arbitrary: fc.record({ kind: fc.constant("fail" as const), pause }) },
  );

interface Outcome {
  state: "pending" | "resolved" | "rejected";
  record: string;
}

async function runProgram(s: fc.Scheduler, ops: readonly Op[], groupCommitMs: number) {
  const config = parseEmbeddedConfig({ mode: "file", groupCommitMs, compactAfterBytes: 4_096 });
  const disk = new ScheduledDisk(s);
  const timers = scheduledTimers(s);
  // Everything on the disk is "live": compaction must carry every record over, so the final
  // content must equal everything ever committed, in order.
  const snapshot = () => ({ records: [...disk.records], liveBytes: 0, liveCount: 0 });
  const open = () =>
    new FileJournal("/scheduled/queue.log", disk, disk.bytes, config, snapshot, recordingLogger(), timers);
  let journal = open();
  let closed = false;
  const closes: Promise<void>[] = [];
  const outcomes: Outcome[] = [];
  /** Records pushed while the journal was open, in push order: what the disk must end up holding. */
  const expected: string[] = [];
  let failures = 0;
  let next = 0;

  const append = (pad: number, again: number, hops: number): void => {
    const record = JSON.stringify({ t: "s", q: `k${next++}${"-".repeat(pad)}` });
    if (!closed) expected.push(record);
    const outcome: Outcome = { state: "pending", record };
    outcomes.push(outcome);
    const target = journal;
    target.subscribe(JSON.parse(record).q).then(
      async () => {
        outcome.state = "resolved";
        for (let i = 0; i < hops; i++) await null;
        for (let i = 0; i < again; i++) append(pad, again - 1, hops);
      },
      () => {
        outcome.state = "rejected";
      },
    );
  };

  for (const op of ops) {
    for (let i = 0; i < op.pause && s.count() > 0; i++) await s.waitNext(1);
    switch (op.kind) {
      case "append":
        append(op.pad, op.again, op.hops);
        break;
      case "settle": {
        // A fire-and-forget record, as an ack is: nobody waits, it rides the next commit.
        const record = `{"t":"a","s":${next++}}`;
        if (!closed) expected.push(record);
        journal.ack({ seq: next - 1 } as StoredMessage);
        break;
      }
      case "reopen": {
        closed = true;
        const closing = journal.close();
        closes.push(closing);
        await s.waitFor(closing);
        journal = open();
        closed = false;
        break;
      }
      case "fail":
        failures++;
        disk.failNextAppend = true;
        break;
    }
  }
  // Liveness is judged before the final close, which would write a stranded record anyway: with the
  // journal left open and nothing else happening, every waiter must resolve on its own.
  await runToIdle(s);
  const stranded = outcomes.filter((o) => o.state === "pending").map((o) => o.record);
  const steps = s.report().length;
  closed = true;
  closes.push(journal.close());
  await runToIdle(s);
  return { disk, outcomes, stranded, expected, closes, failures, steps };
}

/**
 * Runs the scheduled tasks, then lets every microtask chain they started finish (one macrotask
 * turn), until a turn schedules nothing new.
 */
async function runToIdle(s: fc.Scheduler): Promise<void> {
  do {
    await s.waitIdle();
    await new Promise<void>((resolve) => setImmediate(resolve));
  } while (s.count() > 0);
}

/** Whether every promise has settled by now (checked after the program has run to idle). */
async function settled(promises: readonly Promise<void>[]): Promise<boolean> {
  const states = promises.map((p) => {
    const state = { done: false };
    p.then(
      () => (state.done = true),
      () => (state.done = true),
    );
    return state;
  });
  await new Promise<void>((resolve) => setImmediate(resolve));
  return states.every((state) => state.done);
}

describe("file journal under scheduled interleavings", () => {
  for (const groupCommitMs of [0, 2]) {
    it(`commits every record and resolves every waiter (groupCommitMs ${groupCommitMs})`, async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.scheduler(),
          fc.array(opArb(false), { minLength: 1, maxLength: 40 }),
          async (s, ops) => {
            const { disk, outcomes, stranded, expected, closes, steps } = await runProgram(
              s,
              ops,
              groupCommitMs,
            );
            // Liveness: nothing waits for an unrelated later write, or for the close.
            expect(stranded).toEqual([]);
            expect(outcomes.filter((o) => o.state === "pending")).toEqual([]);
            expect(await settled(closes)).toBe(true);
            // Durability and order: the disk holds exactly what was pushed while open, in order,
            // across commits, compactions and reopenings.
            expect(disk.records).toEqual(expected);
            for (const o of outcomes) if (o.state === "resolved") expect(disk.records).toContain(o.record);
            // Boundedness: at most a wake-up, an append, a sync and a compaction per record, plus a few
            // per reopening.
            expect(steps).toBeLessThanOrEqual(5 * (expected.length + ops.length) + 10);
          },
        ),
        { numRuns: 300 },
      );
    });
  }

  it("rejects every waiter, never leaves one hanging, when an append fails", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(opArb(true), { minLength: 1, maxLength: 40 }),
        async (s, ops) => {
          const { disk, outcomes, stranded, closes } = await runProgram(s, ops, 0);
          expect(stranded).toEqual([]);
          expect(outcomes.filter((o) => o.state === "pending")).toEqual([]);
          expect(await settled(closes)).toBe(true);
          // What was confirmed is on the disk; a refused record never is.
          for (const o of outcomes) {
            if (o.state === "resolved") expect(disk.records).toContain(o.record);
            else expect(disk.records).not.toContain(o.record);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
