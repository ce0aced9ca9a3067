/** A value that survives `JSON.stringify` → `JSON.parse` unchanged. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object. */
export type JsonObject = { [key: string]: JsonValue };

/**
 * Checks that `value` is plain JSON (no `undefined`, functions, symbols, bigints, non-finite numbers,
 * class instances or cycles). Returns the path of the first offending member, or `undefined` when it
 * is valid. Every published message goes through it, so a valid value costs no allocation: the walk
 * keeps the objects it is inside in one reused stack, and the path is only spelled out (by a second
 * walk) for a bad one.
 */
export function findNonJson(value: unknown, path = "$"): string | undefined {
  if (!walkIsBad(value, undefined)) return undefined;
  const trail: (string | number)[] = [];
  walkIsBad(value, trail);
  let out = path;
  for (let i = trail.length - 1; i >= 0; i--) {
    const segment = trail[i] as string | number;
    out += typeof segment === "number" ? `[${segment}]` : `.${segment}`;
  }
  return out;
}

/** The objects the walk in progress is inside, by depth (cleared as it comes back up). */
const sharedStack: unknown[] = [];
let sharedStackInUse = false;

function walkIsBad(value: unknown, trail: (string | number)[] | undefined): boolean {
  // A walk started inside another (a proxy's trap publishing, say) gets a stack of its own.
  if (sharedStackInUse) return isBadMember(value, [], 0, trail);
  sharedStackInUse = true;
  try {
    return isBadMember(value, sharedStack, 0, trail);
  } finally {
    sharedStackInUse = false;
  }
}

/**
 * True when `value` (or a member of it) is not JSON; `trail`, when given, then receives the way down
 * to the offending member, innermost first. `open[0..depth)` holds the objects being visited, which
 * a cycle repeats.
 */
function isBadMember(
  value: unknown,
  open: unknown[],
  depth: number,
  trail: (string | number)[] | undefined,
): boolean {
  if (value === null) return false;
  switch (typeof value) {
    case "string":
    case "boolean":
      return false;
    case "number":
      return !Number.isFinite(value);
    case "object": {
      for (let i = 0; i < depth; i++) if (open[i] === value) return true;
      open[depth] = value;
      const bad = isBadObject(value, open, depth, trail);
      open[depth] = undefined;
      return bad;
    }
    default:
      return true;
  }
}

function isBadObject(
  value: object,
  open: unknown[],
  depth: number,
  trail: (string | number)[] | undefined,
): boolean {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      if (isBadMember(value[i], open, depth + 1, trail)) {
        trail?.push(i);
        return true;
      }
    }
    return false;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return true;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (isBadMember((value as Record<string, unknown>)[key], open, depth + 1, trail)) {
      trail?.push(key);
      return true;
    }
  }
  return false;
}
