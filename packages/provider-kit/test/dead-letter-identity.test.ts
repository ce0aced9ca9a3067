import { Headers } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  deadLetterHeaders,
  deadLetterKey,
  distinctDeadLetters,
  PUBLISHED_AT_HEADER,
  redriveHeaders,
  retryHeaders,
} from "../src/index.js";

const published = Object.freeze({
  [Headers.messageId]: "m-1",
  [Headers.correlationId]: "c-1",
  [Headers.deliveryAttempt]: "1",
  [PUBLISHED_AT_HEADER]: "2026-12-07T00:00:00.000Z",
});
const origin = { destination: "/queue/orders" };

/** The key of a stored copy, read the way a provider reads its headers. */
function keyOf(headers: Readonly<Record<string, string>>): string {
  return deadLetterKey({ id: headers[Headers.messageId] ?? "", publishedAt: headers[PUBLISHED_AT_HEADER] });
}

describe("dead-letter identity", () => {
  it("the same delivery dead-lettered twice (a resent copy, a redelivered original) is one dead letter", () => {
    const first = deadLetterHeaders(published, "rejected", origin, "boom", new Date(1_000));
    const again = deadLetterHeaders(published, "incomplete", origin, "timed out", new Date(9_000));
    expect(keyOf(again)).toBe(keyOf(first));
  });

  it("the last copy of a retry chain keeps the identity of its publish", () => {
    const third = retryHeaders(retryHeaders(published, 2, "a"), 3, "b");
    expect(keyOf(deadLetterHeaders(third, "exhausted", origin))).toBe(
      keyOf(deadLetterHeaders(published, "rejected", origin)),
    );
  });

  it("another message id, or the same id published again, is another dead letter", () => {
    const key = keyOf(deadLetterHeaders(published, "rejected", origin));
    expect(keyOf({ ...published, [Headers.messageId]: "m-2" })).not.toBe(key);
    expect(keyOf({ ...published, [PUBLISHED_AT_HEADER]: "2026-12-07T00:00:01.000Z" })).not.toBe(key);
  });

  it("a redriven message that fails again keeps its identity: its earlier copy left the queue with the redrive", () => {
    const dead = deadLetterHeaders(published, "rejected", origin);
    const redriven = redriveHeaders(dead);
    expect(keyOf(deadLetterHeaders(redriven, "rejected", origin))).toBe(keyOf(dead));
  });

  it("a copy without a publish time is named by its id alone", () => {
    expect(deadLetterKey({ id: "broker-7" })).toBe(deadLetterKey({ id: "broker-7", publishedAt: undefined }));
    expect(deadLetterKey({ id: "broker-7" })).not.toBe(deadLetterKey({ id: "broker-8" }));
    expect(deadLetterKey({ id: "a", publishedAt: "b" })).not.toBe(deadLetterKey({ id: 'a","b' }));
  });

  it("distinctDeadLetters keeps the first stored copy of each dead letter, in stored order", () => {
    const stored = [
      { n: 1, id: "a" },
      { n: 2, id: "b" },
      { n: 3, id: "a" },
      { n: 4, id: "c" },
      { n: 5, id: "b" },
      { n: 6, id: "a" },
    ];
    const { letters, surplus } = distinctDeadLetters(stored, (copy) => copy.id);
    expect(letters.map((c) => c.n)).toEqual([1, 2, 4]);
    expect(surplus.map((c) => c.n)).toEqual([3, 5, 6]);
    expect(distinctDeadLetters([], (copy: string) => copy)).toEqual({ letters: [], surplus: [] });
  });
});
