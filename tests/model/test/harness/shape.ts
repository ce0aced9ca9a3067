/**
 * A pipeline as the model suite thinks of it: routes in topological order (a route only sends to
 * routes after it), each a list of steps whose outcome for a message is a pure function of the
 * message's key. `toPipelineConfig` turns a shape into the YAML object a user would write; the
 * oracle computes the expected outcome from the shape alone.
 */

/** How the `model.rule` adapter treats one message key: decided by a hash, never by timing. */
export type Fate =
  | { readonly kind: "ok" }
  /** Ends the chain (`data: null`): the message is acknowledged, nothing goes on. */
  | { readonly kind: "empty" }
  /** Returns a retryable error on attempts 1..times, then passes. */
  | { readonly kind: "transient"; readonly times: number }
  /** Returns a non-retryable error: dead-lettered at once as `rejected`. */
  | { readonly kind: "permanent" }
  /** Throws on attempts 1..times, then passes. */
  | { readonly kind: "throw"; readonly times: number }
  /** Waits past the route's timeout on attempts 1..times (the attempt is incomplete), then passes. */
  | { readonly kind: "timeout"; readonly times: number };

/** Percentages of each fate (they add up to 100); which key gets which is the hash's business. */
export interface FateMix {
  readonly ok: number;
  readonly empty: number;
  readonly transient: number;
  readonly permanent: number;
  readonly throw: number;
  readonly timeout: number;
}

export type Step =
  | { readonly kind: "passthrough" }
  | { readonly kind: "rule"; readonly salt: number; readonly mix: FateMix }
  /** The built-in `filter`: keeps messages whose bucket is listed. */
  | { readonly kind: "filter"; readonly keep: readonly number[] }
  /** `model.expand` (a list of `count` child bodies) then the built-in `split`: fan-out. */
  | { readonly kind: "fan"; readonly count: number }
  /** The built-in `batch` (fan-in), only as the step before a terminal route's sink. */
  | { readonly kind: "batch"; readonly size: number; readonly timeoutMs: number }
  | { readonly kind: "sink" };

export interface RouteShape {
  readonly name: string;
  readonly queue: string;
  /** Route condition: only messages whose bucket is listed run the adapters; others are skipped. */
  readonly condition?: readonly number[];
  readonly steps: readonly Step[];
  /** Names of the routes this one publishes to (all later in the list). */
  readonly outbound: readonly string[];
  readonly concurrency: number;
  readonly prefetch?: number;
  readonly ordering?: "fifo";
  /** Ordered groups keyed by the message's bucket. */
  readonly groupByBucket?: boolean;
  /** Priority from the message's bucket (0–9 over `max` levels). */
  readonly priorityLevels?: number;
  /** Per-route handler timeout, set when a rule of the route may time out. */
  readonly timeoutMs?: number;
  /** Queue settings written under `queues:` instead of on the route's inbound. */
  readonly namedQueue: boolean;
}

export interface Shape {
  readonly name: string;
  readonly routes: readonly RouteShape[];
  readonly maxAttempts: number;
  readonly initialDelayMs: number;
}

/** Buckets a key falls in: conditions, filters, groups and priorities read this field. */
export const BUCKETS = 10;

/** FNV-1a, 32 bits: the same on every run and every machine. */
export function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export const bucketOf = (key: string): number => hash(`bucket:${key}`) % BUCKETS;

/** The body every model message carries. */
export interface ModelBody {
  readonly k: string;
  readonly h: number;
}

export const bodyOf = (key: string): ModelBody => ({ k: key, h: bucketOf(key) });

/** The init message's key. */
export const ROOT_KEY = "m";

/** What `model.rule` does with `key` (salted per step, so two rules disagree). */
export function fateOf(salt: number, mix: FateMix, key: string): Fate {
  const roll = hash(`fate:${salt}:${key}`) % 100;
  const times = 1 + (hash(`times:${salt}:${key}`) % 3);
  const steps: [number, Fate][] = [
    [mix.ok, { kind: "ok" }],
    [mix.empty, { kind: "empty" }],
    [mix.transient, { kind: "transient", times }],
    [mix.permanent, { kind: "permanent" }],
    [mix.throw, { kind: "throw", times }],
    [mix.timeout, { kind: "timeout", times }],
  ];
  let edge = 0;
  for (const [share, fate] of steps) {
    edge += share;
    if (roll < edge) return fate;
  }
  return { kind: "ok" };
}
