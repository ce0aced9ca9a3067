/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * Checks that `value` is plain JSON (no `undefined`, functions, symbols, bigints, non-finite numbers,
 * class instances or cycles). Returns the path of the first offending member, or `undefined` when it
 * is valid. Every published message goes through it, so a valid value costs no allocation beyond
 * the walk's small stack of the objects being visited: the path is only spelled out for a bad one.
 */
export function findNonJson(value: unknown, path = "$"): string | undefined {
  const trail: (string | number)[] = [];
  if (!isBadMember(value, [], trail)) return undefined;
  let out = path;
  for (let i = trail.length - 1; i >= 0; i--) {
    const segment = trail[i] as string | number;
    out += typeof segment === "number" ? `[${segment}]` : `.${segment}`;
  }
  return out;
}

/**
 * True when `value` (or a member of it) is not JSON; `trail` then receives the way down to the
 * offending member, innermost first. `open` holds the objects being visited, which a cycle repeats.
 */
function isBadMember(value: unknown, open: object[], trail: (string | number)[]): boolean {
  if (value === null) return false;
  switch (typeof value) {
    case "string":
    case "boolean":
      return false;
    case "number":
      return !Number.isFinite(value);
    case "object": {
      if (open.includes(value)) return true;
      open.push(value);
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) {
          if (isBadMember(value[i], open, trail)) {
            trail.push(i);
            return true;
          }
        }
      } else {
        const proto = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) return true;
        for (const key in value) {
          if (!Object.hasOwn(value, key)) continue;
          if (isBadMember((value as Record<string, unknown>)[key], open, trail)) {
            trail.push(key);
            return true;
          }
        }
      }
      open.pop();
      return false;
    }
    default:
      return true;
  }
}
