/** Longest pause between two reconnect attempts, in seconds. */
const MAX_RECONNECT_DELAY_SECONDS = 2;

/**
 * Pause before the next reconnect after `failures` failed connects in a row (shared by the pool).
 * postgres.js's own curve grows to 20 s, and a call made in that pause waits it out, so a call
 * made just after the server came back could take 20 s; this one stays at most 2 s (jittered).
 */
export function reconnectDelaySeconds(failures: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** failures, MAX_RECONNECT_DELAY_SECONDS);
}
