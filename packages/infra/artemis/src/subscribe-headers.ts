import { assertIsoTimestampHeader, isoTimestamp, SUBSCRIBED_AT_HEADER } from "./timestamp.js";

/**
 * SUBSCRIBE headers of a subscription's consumer. `x-factflow-subscribed-at` records when this
 * consumer (attachment) was created, in strict ISO-8601 with `Z`: see `timestamp.ts` for why.
 */
export function subscribeHeaders(
  kind: "queue" | "topic",
  windowBytes: number,
  now: Date = new Date(),
): Record<string, string> {
  const subscribedAt = isoTimestamp(now);
  assertIsoTimestampHeader(SUBSCRIBED_AT_HEADER, subscribedAt);
  return {
    ack: "client-individual",
    "subscription-type": kind === "queue" ? "ANYCAST" : "MULTICAST",
    "consumer-window-size": String(windowBytes),
    [SUBSCRIBED_AT_HEADER]: subscribedAt,
  };
}

/** Artemis' consumer window counts bytes; a window of 1 byte means exactly one unsettled delivery. */
export function consumerWindowBytes(prefetch: number, bytesPerMessage: number): number {
  return prefetch === 1 ? 1 : prefetch * bytesPerMessage;
}
