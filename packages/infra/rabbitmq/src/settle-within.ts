/**
 * Waits for `work` to settle, but no longer than `ms`; never rejects. Used on shutdown paths, where
 * a stalled broker must not make `unsubscribe()` or `close()` hang: whatever is left is cleaned up
 * when the connection is torn down.
 */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work.then(
      () => {},
      () => {},
    ),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}
