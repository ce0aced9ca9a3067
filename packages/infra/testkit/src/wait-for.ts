/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this long. @default 10000 */
  timeoutMs?: number;
  /** Pause between two checks. @default 20 */
  intervalMs?: number;
  /** Describes what was awaited, for the timeout message (a function is called at the deadline). */
  description?: string | (() => string);
}

/**
 * Polls `predicate` until it returns a truthy value (which is returned) or the deadline passes
 * (which rejects with a message naming what was awaited). Tests poll with a deadline instead of
 * sleeping a fixed time, so they finish as soon as the broker has done its part.
 */
export async function waitFor<T>(
  predicate: () => T | Promise<T>,
  options: WaitForOptions = {},
): Promise<Exclude<T, false | 0 | "" | null | undefined>> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value as Exclude<T, false | 0 | "" | null | undefined>;
      lastError = undefined;
    } catch (error) {
      // A predicate that throws (a stats call during a reconnect, say) is retried until the deadline.
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const what =
        typeof options.description === "function"
          ? options.description()
          : (options.description ?? "condition");
      const why = lastError === undefined ? "" : ` (last error: ${errorText(lastError)})`;
      throw new Error(`[factflow/infra-testkit] timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}

/** Resolves after `ms` milliseconds. Only for pacing (handler work, spacing a stream), never to wait for an outcome. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One line describing any thrown value. */
export function errorText(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
