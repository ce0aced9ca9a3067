/** Nesting deeper than this is refused in inputs and configs. @default 64 */
export const DEFAULT_MAX_JSON_DEPTH = 64;

/** Limits of `findJsonHazard`. */
export interface JsonHazardLimits {
  /** @default DEFAULT_MAX_JSON_DEPTH */
  readonly maxDepth?: number;
  /**
   * Values (objects, arrays and scalars) visited before giving up. A parsed JSON text never has more
   * values than bytes; a YAML document can, when aliases repeat a part many times. @default Infinity
   */
  readonly maxNodes?: number;
}

/** Why a value was refused by `findJsonHazard`. */
export interface JsonHazard {
  /** `$.a[2].b`: where the problem is. */
  readonly path: string;
  readonly kind: "depth" | "size" | "nul" | "surrogate";
  /** What is wrong and how to fix it, without the offending value. */
  readonly message: string;
}

interface Frame {
  readonly value: unknown;
  readonly depth: number;
  readonly parent: Frame | undefined;
  readonly key: string | number | undefined;
}

/**
 * Finds the first member of a parsed JSON/YAML value that a database or a later `JSON.stringify`
 * would choke on: nesting deeper than `maxDepth`, a NUL character, or a lone UTF-16 surrogate (in a
 * string or a key), or more than `maxNodes` values in all. Iterative, so hostile nesting cannot
 * overflow the stack; cycles (a YAML alias of its own parent) stop at the depth limit. Returns
 * `undefined` when the value is safe.
 *
 * Numbers, booleans and `null` cannot be hazards: they are counted, never given a frame of their own,
 * so a large input (hundreds of thousands of items, checked before an execution starts) costs a
 * frame per object, array and string only.
 */
export function findJsonHazard(value: unknown, limits: JsonHazardLimits = {}): JsonHazard | undefined {
  const maxDepth = limits.maxDepth ?? DEFAULT_MAX_JSON_DEPTH;
  const maxNodes = limits.maxNodes ?? Number.POSITIVE_INFINITY;
  const stack: Frame[] = [{ value, depth: 0, parent: undefined, key: undefined }];
  let visited = 0;
  for (let frame = stack.pop(); frame !== undefined; frame = stack.pop()) {
    if (++visited > maxNodes) return tooMany(maxNodes);
    const current = frame.value;
    if (typeof current === "string") {
      const problem = stringProblem(current);
      if (problem !== undefined) return hazard(frame, problem, "value");
      continue;
    }
    if (current === null || typeof current !== "object") continue;
    if (frame.depth >= maxDepth) {
      return {
        path: pathOf(frame),
        kind: "depth",
        message: `is nested more than ${maxDepth} levels deep; flatten it (the limit is ${maxDepth})`,
      };
    }
    const depth = frame.depth + 1;
    if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) {
        const member: unknown = current[i];
        if (needsFrame(member)) stack.push({ value: member, depth, parent: frame, key: i });
        else if (++visited > maxNodes) return tooMany(maxNodes);
      }
      continue;
    }
    const record = current as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const problem = stringProblem(key);
      if (problem !== undefined) return hazard({ value: key, depth, parent: frame, key }, problem, "key");
      const member = record[key];
      if (needsFrame(member)) stack.push({ value: member, depth, parent: frame, key });
      else if (++visited > maxNodes) return tooMany(maxNodes);
    }
  }
  return undefined;
}

/** Objects, arrays and strings are looked into; other values are safe as they are. */
function needsFrame(value: unknown): boolean {
  return typeof value === "string" || (typeof value === "object" && value !== null);
}

function tooMany(maxNodes: number): JsonHazard {
  return { path: "$", kind: "size", message: `holds more than ${maxNodes} values; send less` };
}

/**
 * `String.prototype.isWellFormed` (every Node this project supports, 20 and later; TypeScript's
 * ES2023 library does not declare it): false when the text holds a lone UTF-16 surrogate.
 */
const isWellFormed = (String.prototype as unknown as { isWellFormed: (this: string) => boolean })
  .isWellFormed;

function stringProblem(text: string): JsonHazard["kind"] | undefined {
  if (text.includes("\u0000")) return "nul";
  return isWellFormed.call(text) ? undefined : "surrogate";
}

function hazard(frame: Frame, kind: JsonHazard["kind"], where: "key" | "value"): JsonHazard {
  const what = where === "key" ? "has a key that contains" : "contains";
  const message =
    kind === "nul"
      ? `${what} a NUL character (\\u0000), which cannot be stored; remove it`
      : `${what} a lone UTF-16 surrogate, which is not valid Unicode; send well-formed text`;
  return { path: pathOf(frame), kind, message };
}

function pathOf(frame: Frame): string {
  const parts: string[] = [];
  for (let f: Frame | undefined = frame; f?.key !== undefined; f = f.parent) {
    parts.push(
      typeof f.key === "number"
        ? `[${f.key}]`
        : /^[A-Za-z_$][\w$]*$/.test(f.key)
          ? `.${f.key}`
          : `[${JSON.stringify(f.key.slice(0, 40))}]`,
    );
  }
  return `$${parts.reverse().join("")}`;
}
