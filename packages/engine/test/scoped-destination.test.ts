import { describe, expect, it } from "vitest";
import { ExecutionScopedQueue } from "../src/execution/execution-scoped-queue.js";
import { parseScopedDestination, scopedDestination } from "../src/index.js";

const ID = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";

describe("scopedDestination", () => {
  it("puts the queue under the execution id", () => {
    expect(scopedDestination(ID, "parse.in")).toBe(`/queue/${ID}/parse.in`);
    expect(scopedDestination("factflow-diagnostic-1a2b3c4d", "docs.discover")).toBe(
      "/queue/factflow-diagnostic-1a2b3c4d/docs.discover",
    );
  });

  it("is the layout ExecutionScopedQueue scopes to", () => {
    const inner = { name: "x", capabilities: {}, admin: {} } as unknown as ConstructorParameters<
      typeof ExecutionScopedQueue
    >[0];
    expect(new ExecutionScopedQueue(inner, ID).scope("/queue/parse.in")).toBe(
      scopedDestination(ID, "parse.in"),
    );
  });

  it("refuses parts that would not form one valid destination", () => {
    expect(() => scopedDestination("", "parse.in")).toThrow(/one non-empty name segment/);
    expect(() => scopedDestination("a/b", "parse.in")).toThrow(/without "\/"/);
    expect(() => scopedDestination("has space", "parse.in")).toThrow(/invalid segment "has space"/);
    expect(() => scopedDestination(ID, "")).toThrow(/invalid segment ""/);
    expect(() => scopedDestination(ID, "/queue/parse.in")).toThrow(/invalid segment ""/);
    expect(() => scopedDestination(ID, "x".repeat(200))).toThrow(/1 to 200 characters/);
    try {
      scopedDestination(ID, "bad queue");
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ name: "PipelineError", code: "invalid_argument" });
    }
  });
});

describe("parseScopedDestination", () => {
  it("takes an execution's queue apart", () => {
    expect(parseScopedDestination(`/queue/${ID}/parse.in`)).toEqual({ executionId: ID, queue: "parse.in" });
    // Everything after the execution id is the queue, whatever its segments.
    expect(parseScopedDestination(`/queue/${ID}/a/b`)).toEqual({ executionId: ID, queue: "a/b" });
  });

  it("is the inverse of scopedDestination", () => {
    for (const [id, queue] of [
      [ID, "docs.sections"],
      ["factflow-diagnostic-1a2b3c4d", "q:1"],
      [ID.toUpperCase(), "a_b-c"],
    ] as const) {
      expect(parseScopedDestination(scopedDestination(id, queue))).toEqual({ executionId: id, queue });
    }
  });

  it("gives undefined for topics, unscoped queues and malformed names, and never throws", () => {
    for (const destination of [
      "/queue/parse.in",
      `/topic/${ID}/parse.in`,
      `/queue/${ID}/`,
      `/queue/${ID}//parse.in`,
      "/queue//parse.in",
      `/queue/${ID}/bad name`,
      `queue/${ID}/parse.in`,
      `${ID}/parse.in`,
      "/queue/",
      "",
    ]) {
      expect(parseScopedDestination(destination), destination).toBeUndefined();
    }
  });
});
