import { openMemoryLineageDatabase } from "@factflow/lineage";
import type { LineageProtocol } from "@factflow/protocols";
import { silentLogger } from "@factflow/protocols";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CompletionGate } from "../src/execution/completion-gate.js";
import { newId } from "../src/ids.js";
import { messageRow } from "../src/lineage/lineage-rows.js";
import { waitFor } from "./harness.js";

// A server that joined an execution (cluster mode) has nothing of its own to go by: the execution is
// complete when the shared lineage has no open row, once the creator has registered the seed. Found
// by tests/cluster on a loaded machine: the count was taken before the seed existed, "seeded" turned
// true while the gate waited, and the execution ended with its 30 items still queued.

describe("completion gate of a server that joined an execution", () => {
  it("counts open rows only after the seed is registered, never before", async () => {
    const db = openMemoryLineageDatabase();
    const executionId = newId();
    const seed = messageRow({
      executionId,
      route: "split",
      messageId: newId(),
      correlationId: "c",
      payload: { items: [1, 2, 3] },
    });
    let seededChecks = 0;
    let completed = 0;
    const gate = new CompletionGate({
      executionId,
      processors: [],
      lineage: db.lineage,
      logger: silentLogger,
      pollMs: 5,
      onComplete: () => completed++,
      // The creator registers its seed while this server asks whether it has: the worst moment.
      seeded: async () => {
        seededChecks++;
        if (seededChecks === 1) return false;
        if (seededChecks === 2) await db.lineage.registerPending([seed]);
        return true;
      },
      queuesDrained: async () => true,
    });
    gate.start();
    await waitFor(() => seededChecks >= 2, "the second seeded check");
    // The seed is open: several further polls must not end the execution.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(completed).toBe(0);
    expect(await db.lineage.countOpen(executionId)).toBe(1);

    db.lineage.update(seed.id, { status: "completed", finishedAt: new Date().toISOString() });
    await waitFor(() => completed > 0, "the execution to complete");
    expect(completed).toBe(1);
    gate.close();
  });
});

describe("completion gate poll while nothing happens here", () => {
  afterEach(() => vi.useRealTimers());

  it("backs off from pollMs to maxPollMs without activity and returns to pollMs on activity", async () => {
    vi.useFakeTimers();
    let counts = 0;
    // Rows stay open (another server works on the execution): every check asks the database.
    const lineage = {
      flush: async () => {},
      countOpen: async () => {
        counts++;
        return 1;
      },
    } as unknown as LineageProtocol;
    const gate = new CompletionGate({
      executionId: newId(),
      processors: [],
      lineage,
      logger: silentLogger,
      pollMs: 250,
      maxPollMs: 2000,
      onComplete: () => undefined,
    });
    gate.start();
    await vi.advanceTimersByTimeAsync(10_000);
    // The start's check, then polls at 250, 750, 1750, 3750, 5750, 7750 and 9750 ms (a fixed
    // 250 ms poll would have asked 41 times).
    expect(counts).toBe(8);
    gate.activity();
    counts = 0;
    await vi.advanceTimersByTimeAsync(250);
    expect(counts).toBe(1);
    gate.close();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(counts).toBe(1);
  });
});

describe("completion gate of a server that holds no work of the execution", () => {
  afterEach(() => vi.useRealTimers());

  /** Lineage whose rows stay open (another server works on them); counts the checks. */
  function sharedLineage(open: () => number) {
    const calls = { counts: 0 };
    const lineage = {
      flush: async () => {},
      countOpen: async () => {
        calls.counts++;
        return open();
      },
    } as unknown as LineageProtocol;
    return { lineage, calls };
  }

  it("stops polling after a check finds only other servers' rows open, and polls again once a delivery starts here", async () => {
    vi.useFakeTimers();
    const { lineage, calls } = sharedLineage(() => 3);
    const gate = new CompletionGate({
      executionId: newId(),
      processors: [],
      lineage,
      logger: silentLogger,
      pollMs: 250,
      maxPollMs: 2000,
      pollOnlyWhileBusy: true,
      onComplete: () => undefined,
    });
    gate.start();
    await vi.advanceTimersByTimeAsync(0);
    // The start's check found 3 open rows and nothing of this process: no poll follows.
    expect(calls.counts).toBe(1);
    expect(gate.isDormant).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls.counts).toBe(1);

    // A delivery of the execution starts here: polls resume, from pollMs.
    gate.activity();
    expect(gate.isDormant).toBe(false);
    await vi.advanceTimersByTimeAsync(250);
    expect(calls.counts).toBe(2);
    expect(gate.isDormant).toBe(true);
    gate.close();
  });

  it("completes at the check after the last delivery here, and on a nudge (a takeover closed rows)", async () => {
    vi.useFakeTimers();
    let open = 2;
    let completed = 0;
    const { lineage, calls } = sharedLineage(() => open);
    const gate = new CompletionGate({
      executionId: newId(),
      processors: [],
      lineage,
      logger: silentLogger,
      pollOnlyWhileBusy: true,
      onComplete: () => completed++,
      queuesDrained: async () => true,
    });
    gate.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.isDormant).toBe(true);
    // Rows closed outside this process's deliveries: the nudge checks at once.
    open = 0;
    gate.nudge();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls.counts).toBe(2);
    expect(completed).toBe(1);
  });

  it("polls on with back-off once this server owns the execution (pollAlways)", async () => {
    vi.useFakeTimers();
    const { lineage, calls } = sharedLineage(() => 1);
    const gate = new CompletionGate({
      executionId: newId(),
      processors: [],
      lineage,
      logger: silentLogger,
      pollMs: 250,
      maxPollMs: 2000,
      pollOnlyWhileBusy: true,
      onComplete: () => undefined,
    });
    gate.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(gate.isDormant).toBe(true);
    calls.counts = 0;
    gate.pollAlways();
    await vi.advanceTimersByTimeAsync(10_000);
    // The nudge's check, then polls at 250, 750, 1750, 3750, 5750, 7750 and 9750 ms.
    expect(calls.counts).toBe(8);
    expect(gate.isDormant).toBe(false);
    gate.close();
  });
});
