import {
  isFactflowError,
  type JsonValue,
  type OutboundMessage,
  type QueueProtocol,
} from "@factflow/protocols";
import { expect } from "vitest";

/** Publishes one message per body, in order, each awaited; returns the ids. */
export async function publishAll(
  provider: QueueProtocol,
  destination: string,
  bodies: readonly JsonValue[],
  extra: Omit<OutboundMessage, "body"> = {},
): Promise<string[]> {
  const ids: string[] = [];
  for (const body of bodies) ids.push((await provider.publish(destination, { ...extra, body })).id);
  return ids;
}

/** `[0, 1, ..., n - 1]`. */
export function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** Asserts that `work` rejects with a Factflow error (any copy of the class) and returns it. */
export async function expectFactflowRejection(
  work: () => Promise<unknown>,
  what: string,
): Promise<Error & { code: string }> {
  let thrown: unknown;
  try {
    await work();
  } catch (error) {
    thrown = error;
  }
  expect(thrown, `${what}: expected a rejection`).toBeDefined();
  expect(
    isFactflowError(thrown),
    `${what}: expected a FactflowError/ProviderError, got ${String(thrown)}`,
  ).toBe(true);
  const error = thrown as Error & { code: string };
  expect(error.message.length, `${what}: the error message should say what failed`).toBeGreaterThan(15);
  return error;
}

/** A promise the test resolves by hand, to hold handlers open. */
export function gate(): {
  readonly promise: Promise<void>;
  open(): void;
  readonly isOpen: () => boolean;
  /** Waits for the gate, but gives up (throwing, so the delivery is incomplete) when `signal` aborts. */
  wait(signal: AbortSignal): Promise<void>;
} {
  let open!: () => void;
  let isOpen = false;
  const promise = new Promise<void>((resolve) => {
    open = () => {
      isOpen = true;
      resolve();
    };
  });
  const wait = async (signal: AbortSignal): Promise<void> => {
    await Promise.race([promise, aborted(signal)]);
    if (!isOpen) throw new Error("conformance: handler aborted while held");
  };
  return { promise, open: () => open(), isOpen: () => isOpen, wait };
}

/** Resolves when `signal` aborts (at once if it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

/** The body field `n` of a recorded body, for ordering checks. */
export function field(body: JsonValue, key: string): JsonValue | undefined {
  return body !== null && typeof body === "object" && !Array.isArray(body) ? body[key] : undefined;
}
