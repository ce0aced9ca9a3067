import { describe, expect, it } from "vitest";
import { escapeSubscription, laneFor, redisKeyOf } from "../src/index.js";

describe("laneFor", () => {
  it("keeps every key of a queue in one hash slot, dead letters in <queue>.dlq form", () => {
    const lane = laneFor("p:", "/queue/exec-1/parse");
    expect(lane).toMatchObject({
      kind: "queue",
      stream: "p:{q:exec-1/parse}",
      delayed: "p:{q:exec-1/parse}:delayed",
      dlq: "p:{q:exec-1/parse}:dlq",
      consumers: "p:{q:exec-1/parse}:consumers",
    });
  });

  it("gives each topic subscription its own lane, with the name escaped", () => {
    const lane = laneFor("p:", "/topic/events", "audit:{1}");
    expect(lane.stream).toBe(`p:{t:events}:s:${escapeSubscription("audit:{1}")}`);
    expect(lane.stream).not.toMatch(/audit:|\{1\}/);
    expect(lane.subscriptions).toBe("p:{t:events}:subs");
  });

  it("keeps names that differ only in separators apart, and a queue apart from a topic", () => {
    const names = ["a/b", "a.b", "a_b", "a-b", "a:b", "A/B"].map((n) => laneFor("p:", `/queue/${n}`).stream);
    expect(new Set(names).size).toBe(names.length);
    expect(redisKeyOf("p:", "/queue/x")).not.toBe(redisKeyOf("p:", "/topic/x"));
  });

  it("asks for the subscription of a topic", () => {
    expect(() => laneFor("p:", "/topic/events")).toThrow(/name the subscription/);
  });
});
