/**
 * `resolve` remembered per destination: publishing resolves the same few destinations over and
 * over, so each is parsed (and checked) once. Bounded: executions come and go, each with
 * destinations of its own, so the memo starts over once it holds `limit` of them.
 */
export function destinationMemo<T>(
  resolve: (destination: string) => T,
  limit = 10_000,
): (destination: string) => T {
  const memo = new Map<string, T>();
  return (destination) => {
    let value = memo.get(destination);
    if (value === undefined) {
      value = resolve(destination);
      if (memo.size >= limit) memo.clear();
      memo.set(destination, value);
    }
    return value;
  };
}
