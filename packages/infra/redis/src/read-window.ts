/** What a subscription's read loop knows when it decides whether to read new entries. */
export interface ReadWindowState {
  readonly prefetch: number;
  readonly concurrency: number;
  /** Delivered and not settled yet: running, settling, or waiting in the backlog. */
  readonly unsettled: number;
  /** Delivered and waiting for a handler. */
  readonly waiting: number;
  /** Handlers running now. */
  readonly running: number;
  /** The window was full since the last read. */
  readonly refilling: boolean;
}

/**
 * How many new entries to ask for: 0 means wait for a settlement or a handler to finish.
 *
 * Never more than `prefetch` unsettled. Once the window was full, the next read waits until half of
 * it is free, so a busy subscription reads in batches instead of once per settlement; but never while
 * a handler is free with nothing to run. Unsettled deliveries may be waiting for entries still in
 * the stream (a batch that fills from later messages and stays unsettled until then), so waiting
 * for them to free the window could wait forever.
 */
export function readCount(state: ReadWindowState): number {
  const free = state.prefetch - state.unsettled;
  if (free <= 0) return 0;
  const idleHandler = state.waiting === 0 && state.running < state.concurrency;
  const refillAt = Math.max(1, Math.floor(state.prefetch / 2));
  if (state.refilling && free < refillAt && !idleHandler) return 0;
  return free;
}
