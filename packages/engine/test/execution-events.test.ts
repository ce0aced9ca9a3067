import { describe, expect, it } from "vitest";
import { ExecutionEventHub } from "../src/execution/execution-events.js";
import type { ExecutionEvent } from "../src/index.js";

describe("ExecutionEventHub", () => {
  it("numbers events per execution and replays those after a Last-Event-ID", () => {
    const hub = new ExecutionEventHub();
    hub.emit("a", "started");
    hub.emit("b", "started");
    hub.emit("a", "route_progress", { n: 1 });
    hub.emit("a", "completed");
    const seen: ExecutionEvent[] = [];
    hub.subscribe("a", (e) => seen.push(e), 1);
    expect(seen.map((e) => [e.id, e.type])).toEqual([
      [2, "route_progress"],
      [3, "completed"],
    ]);
    expect(hub.history("b").map((e) => e.id)).toEqual([1]);
    // Nothing is emitted after the terminal event.
    expect(hub.emit("a", "failed")).toBeUndefined();
  });

  it("keeps a bounded history, dropping progress before lifecycle events", () => {
    const hub = new ExecutionEventHub({ historyPerExecution: 3 });
    hub.emit("x", "started");
    for (let i = 0; i < 10; i++) hub.emit("x", "route_progress", { i });
    hub.emit("x", "completed");
    const kept = hub.history("x");
    expect(kept).toHaveLength(3);
    expect(kept[0]?.type).toBe("started");
    expect(kept.at(-1)?.type).toBe("completed");
    expect(kept.at(-1)?.id).toBe(12);
  });
});
