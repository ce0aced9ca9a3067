/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * Checks that `value` is plain JSON (no `undefined`, functions, symbols, bigints, non-finite numbers,
 * class instances or cycles). Returns the path of the first offending member, or `undefined` when it
 * is valid.
 */
export function findNonJson(value: unknown, path = "$", seen = new Set<object>()): string | undefined {
  if (value === null) return undefined;
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined;
    case "number":
      return Number.isFinite(value) ? undefined : path;
    case "object": {
      if (seen.has(value)) return path;
      seen.add(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          const bad = findNonJson(value[i], `${path}[${i}]`, seen);
          if (bad !== undefined) return bad;
        }
      } else {
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) return path;
        for (const [key, member] of Object.entries(value)) {
          const bad = findNonJson(member, `${path}.${key}`, seen);
          if (bad !== undefined) return bad;
        }
      }
      seen.delete(value);
      return undefined;
    }
    default:
      return path;
  }
}
