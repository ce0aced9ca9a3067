import { describe, expect, it } from "vitest";
import type { StallDiagnosis } from "../src/index.js";
import { StallWatch } from "../src/stall/stall-watch.js";
import { waitFor } from "./harness.js";

// The watch on its own, with a progress counter and diagnoses the test controls.

function diagnosisWith(fingerprint: string): StallDiagnosis {
  return {
    executionId: "e",
    phase: "running",
    lastProgressAt: new Date().toISOString(),
    quietMs: 0,
    seedPending: 0,
    routes: [],
    lineage: { openRows: 0, queuedWrites: 0 },
    provider: { name: "test", published: 0, confirmed: 0 },
    waitingFor: [],
    problems: [],
    fingerprint,
  };
}

function watch(options: { shared?: boolean; fingerprints: () => string }) {
  const state = { sample: 0, diagnoses: 0, stalls: 0, resumes: 0 };
  const w = new StallWatch({
    afterMs: 100,
    ...(options.shared === undefined ? {} : { shared: options.shared }),
    sample: () => state.sample,
    diagnose: async () => {
      state.diagnoses++;
      return diagnosisWith(options.fingerprints());
    },
    onStall: () => {
      state.stalls++;
    },
    onResume: () => {
      state.resumes++;
    },
  });
  return { w, state };
}

describe("StallWatch", () => {
  it("reports once per stall and ends the stall on progress", async () => {
    const { w, state } = watch({ fingerprints: () => "same" });
    w.start();
    try {
      await waitFor(() => state.stalls === 1, "the first stall");
      expect(w.current()).toBeDefined();
      await waitFor(() => w.quietMs() >= 500, "a long quiet");
      expect(state.stalls).toBe(1);
      state.sample++;
      expect(w.current()).toBeUndefined();
      expect(state.resumes).toBe(1);
      await waitFor(() => state.stalls === 2, "the second stall");
    } finally {
      w.stop();
    }
  });

  it("in a cluster, waits until lineage has not changed across two diagnoses", async () => {
    let lineage = 0;
    const moving = watch({ shared: true, fingerprints: () => `rows ${lineage++}` });
    moving.w.start();
    const still = watch({ shared: true, fingerprints: () => "rows" });
    still.w.start();
    try {
      await waitFor(() => moving.state.diagnoses >= 4, "several diagnoses");
      // Lineage moved between every two of them: another process is doing the work.
      expect(moving.state.stalls).toBe(0);
      await waitFor(() => still.state.stalls === 1, "the stall with unchanged lineage");
      expect(still.state.diagnoses).toBe(2);
    } finally {
      moving.w.stop();
      still.w.stop();
    }
  });

  it("only tracks progress with afterMs 0", async () => {
    const state = { sample: 0, diagnoses: 0 };
    const w = new StallWatch({
      afterMs: 0,
      sample: () => state.sample,
      diagnose: async () => {
        state.diagnoses++;
        return diagnosisWith("");
      },
      onStall: () => {},
      onResume: () => {},
    });
    w.start();
    await waitFor(() => w.quietMs() >= 200, "a quiet period");
    state.sample++;
    expect(w.quietMs()).toBeLessThan(200);
    expect(state.diagnoses).toBe(0);
    w.stop();
  });
});
