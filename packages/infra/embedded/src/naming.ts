import type { Destination } from "@factflow/protocols";
import { checkDestination } from "@factflow/provider-kit";
import { invalidInput, PROVIDER_NAME } from "./errors.js";

/** A validated destination. */
export interface Target {
  readonly kind: "queue" | "topic";
  readonly name: string;
  readonly destination: Destination;
}

const SUBSCRIPTION = /^[A-Za-z0-9_.:/-]{1,200}$/;

/**
 * The embedded naming strategy. Destinations keep the protocol's own names (no broker limits apply);
 * internally every place messages wait is a "physical queue" keyed by:
 * - `q:<name>` for `/queue/<name>`;
 * - `t:<topic>#<subscription>` for one durable subscription of `/topic/<topic>` (each gets its own
 *   copy of every message). `#` cannot occur in a destination or subscription name, so keys never clash.
 */
export function resolveTarget(destination: string): Target {
  const parsed = checkDestination(PROVIDER_NAME, destination);
  return { kind: parsed.kind, name: parsed.name, destination: destination as Destination };
}

export function validateSubscriptionName(name: unknown): string {
  if (typeof name !== "string" || !SUBSCRIPTION.test(name)) {
    throw invalidInput(
      "invalid_destination",
      `subscription name ${JSON.stringify(name)} is invalid: use 1 to 200 letters, digits, "_", ".", ":", "/" or "-"`,
    );
  }
  return name;
}

export function queueKey(name: string): string {
  return `q:${name}`;
}

export function subscriptionKey(topic: string, subscription: string): string {
  return `t:${topic}#${subscription}`;
}

/** Reverses {@link queueKey} / {@link subscriptionKey}; used when the log is replayed. */
export function parseKey(
  key: string,
): { kind: "queue"; name: string } | { kind: "topic"; name: string; subscription: string } | undefined {
  if (key.startsWith("q:")) return { kind: "queue", name: key.slice(2) };
  if (key.startsWith("t:")) {
    const hash = key.indexOf("#");
    if (hash < 0) return undefined;
    return { kind: "topic", name: key.slice(2, hash), subscription: key.slice(hash + 1) };
  }
  return undefined;
}
