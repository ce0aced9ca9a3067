import { describe, expect, it } from "vitest";
import { deadLetterQueueOf, findNonJson, parseDestination } from "../src/index.js";

describe("parseDestination", () => {
  it("splits queues and topics", () => {
    expect(parseDestination("/queue/019ce6d0/scraping.tasks")).toEqual({
      kind: "queue",
      name: "019ce6d0/scraping.tasks",
    });
    expect(parseDestination("/topic/config.reloaded")).toEqual({ kind: "topic", name: "config.reloaded" });
  });

  it.each([
    ["scraping.tasks", "must start with"],
    ["/queue/", "1 to 200 characters"],
    ["/queue/a//b", 'invalid segment ""'],
    ["/queue/a b", 'invalid segment "a b"'],
    ["/topic/ü", "invalid segment"],
    [`/queue/${"x".repeat(201)}`, "1 to 200 characters"],
  ])("rejects %j with a message that says how to fix it", (input, fragment) => {
    const parsed = parseDestination(input);
    expect(parsed).toHaveProperty("error");
    expect((parsed as { error: string }).error).toContain(fragment);
  });

  it("names the dead-letter queue <queue>.dlq", () => {
    expect(deadLetterQueueOf("/queue/a/b")).toBe("/queue/a/b.dlq");
  });
});

describe("findNonJson", () => {
  it("accepts plain JSON", () => {
    expect(findNonJson({ a: [1, "x", null, true, { b: 2.5 }] })).toBeUndefined();
  });

  it("points at the first value that is not JSON", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(findNonJson({ a: { b: undefined } })).toBe("$.a.b");
    expect(findNonJson([1, () => 1])).toBe("$[1]");
    expect(findNonJson({ n: 10n })).toBe("$.n");
    expect(findNonJson({ n: Number.NaN })).toBe("$.n");
    expect(findNonJson({ d: new Date(0) })).toBe("$.d");
    expect(findNonJson(cyclic)).toBe("$.self");
  });

  it("accepts the same object twice when it is not a cycle", () => {
    const shared = { x: 1 };
    expect(findNonJson({ a: shared, b: shared })).toBeUndefined();
  });

  it("gives the same answers when a check runs inside another (a proxy trap publishing, say)", () => {
    const inner: string[] = [];
    const body = new Proxy(
      { a: { b: 1 } },
      {
        getPrototypeOf(target) {
          inner.push(String(findNonJson({ x: [1, undefined] })));
          return Object.getPrototypeOf(target);
        },
      },
    );
    expect(findNonJson({ outer: body, after: { c: () => 1 } })).toBe("$.after.c");
    expect(inner[0]).toBe("$.x[1]");
    // And the shared stack is left clean: a later check sees no stale "cycle".
    const again = { a: { b: 1 } };
    expect(findNonJson({ one: again, two: again })).toBeUndefined();
  });
});
