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

/** Where a value sits: its key in its container, and that container's place. */
interface Place {
  readonly parent: Place | undefined;
  readonly key: string | number | undefined;
}

/** An object or array being walked, member by member. */
interface Container extends Place {
  readonly value: unknown[] | Record<string, unknown>;
  /** An object's keys; undefined for an array. */
  readonly keys: string[] | undefined;
  readonly length: number;
  readonly depth: number;
  next: number;
}

/**
 * Finds the first member of a parsed JSON/YAML value that a database or a later `JSON.stringify`
 * would choke on: nesting deeper than `maxDepth`, a NUL character, or a lone UTF-16 surrogate (in a
 * string or a key), or more than `maxNodes` values in all. Iterative, so hostile nesting cannot
 * overflow the stack; cycles (a YAML alias of its own parent) stop at the depth limit. Returns
 * `undefined` when the value is safe.
 *
 * Numbers, booleans and `null` cannot be hazards: they are only counted. The walk allocates per
 * object and array, not per member, so a large input (hundreds of thousands of items, checked before
 * an execution starts) costs little beyond reading it.
 */
export function findJsonHazard(value: unknown, limits: JsonHazardLimits = {}): JsonHazard | undefined {
  const walk = new JsonHazardWalk(value, limits);
  walk.advance(Number.POSITIVE_INFINITY);
  return walk.hazard;
}

/**
 * {@link findJsonHazard} as a walk that stops after a given number of values and goes on when asked,
 * so a caller on a busy event loop can spread the check of a large value over several turns (the
 * 300 000 items of a 5 MB input take tens of milliseconds in one go). It keeps one cursor per open
 * object or array, never a record per member: an array of 300 000 items costs no allocation per item.
 */
export class JsonHazardWalk {
  readonly #stack: Container[] = [];
  #visited = 0;
  readonly #maxDepth: number;
  readonly #maxNodes: number;
  /** What was found, once {@link advance} has returned true; undefined for a safe value. */
  hazard: JsonHazard | undefined;

  constructor(value: unknown, limits: JsonHazardLimits = {}) {
    this.#maxDepth = limits.maxDepth ?? DEFAULT_MAX_JSON_DEPTH;
    this.#maxNodes = limits.maxNodes ?? Number.POSITIVE_INFINITY;
    // The root alone: a string's check, or an object's or array's cursor.
    this.hazard = this.#enter(value, { parent: undefined, key: undefined }, 0);
  }

  /** Looks at most `values` more values; true once the walk has ended. */
  advance(values: number): boolean {
    if (this.hazard === undefined) this.hazard = this.#walk(values);
    if (this.hazard !== undefined) this.#stack.length = 0;
    return this.#stack.length === 0;
  }

  /**
   * Counts `value` and checks it: a string's text, an object's or array's depth (which then gets a
   * cursor of its own). Returns what is wrong with it, if anything.
   */
  #enter(value: unknown, place: Place, depth: number): JsonHazard | undefined {
    if (++this.#visited > this.#maxNodes) return tooMany(this.#maxNodes);
    if (typeof value === "string") {
      const problem = stringProblem(value);
      return problem === undefined ? undefined : hazard(place, problem, "value");
    }
    if (value === null || typeof value !== "object") return undefined;
    if (depth >= this.#maxDepth) {
      return {
        path: pathOf(place),
        kind: "depth",
        message: `is nested more than ${this.#maxDepth} levels deep; flatten it (the limit is ${this.#maxDepth})`,
      };
    }
    const keys = Array.isArray(value) ? undefined : Object.keys(value);
    const length = keys === undefined ? (value as unknown[]).length : keys.length;
    if (length > 0) {
      const container: Container = {
        value: value as Container["value"],
        keys,
        length,
        depth,
        next: 0,
        parent: place.parent,
        key: place.key,
      };
      this.#stack.push(container);
    }
    return undefined;
  }

  #walk(values: number): JsonHazard | undefined {
    const stack = this.#stack;
    for (let taken = 0; taken < values; taken++) {
      const top = stack[stack.length - 1];
      if (top === undefined) return undefined;
      const index = top.next++;
      if (top.next >= top.length) stack.pop();
      const keys = top.keys;
      let member: unknown;
      let key: string | number;
      if (keys === undefined) {
        key = index;
        member = (top.value as unknown[])[index];
      } else {
        key = keys[index] as string;
        const problem = stringProblem(key);
        if (problem !== undefined) return hazard({ parent: top, key }, problem, "key");
        member = (top.value as Record<string, unknown>)[key];
      }
      // Numbers, booleans and null: counted, nothing else to check.
      if (typeof member !== "string" && (typeof member !== "object" || member === null)) {
        if (++this.#visited > this.#maxNodes) return tooMany(this.#maxNodes);
        continue;
      }
      const found = this.#enter(member, { parent: top, key }, top.depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
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

function hazard(place: Place, kind: JsonHazard["kind"], where: "key" | "value"): JsonHazard {
  const what = where === "key" ? "has a key that contains" : "contains";
  const message =
    kind === "nul"
      ? `${what} a NUL character (\\u0000), which cannot be stored; remove it`
      : `${what} a lone UTF-16 surrogate, which is not valid Unicode; send well-formed text`;
  return { path: pathOf(place), kind, message };
}

function pathOf(place: Place): string {
  const parts: string[] = [];
  for (let f: Place | undefined = place; f?.key !== undefined; f = f.parent) {
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
