import { bodyOf, fateOf, ROOT_KEY, type RouteShape, type Shape } from "./shape.js";

export type DeadReason = "rejected" | "exhausted" | "incomplete";

/** What one route must show at the end of an execution. */
export interface RouteOutcome {
  /** Distinct messages delivered to the route. */
  arrived: number;
  /** Skipped by the route condition. */
  skipped: number;
  /** Settled for good without a dead letter (passed on, filtered, fanned out, emptied, sunk). */
  completed: number;
  /** Dead-lettered, by reason. */
  dead: Record<DeadReason, number>;
  /** Keys dead-lettered here (sorted): the set a replay of this route heals. */
  deadKeys: string[];
  /** Attempts that failed and were retried. */
  retries: number;
  /** Keys the route's sink saw (sorted; batches flattened). */
  sunk: string[];
}

export interface Expected {
  readonly routes: Record<string, RouteOutcome>;
  readonly status: "completed";
}

const empty = (): RouteOutcome => ({
  arrived: 0,
  skipped: 0,
  completed: 0,
  dead: { rejected: 0, exhausted: 0, incomplete: 0 },
  deadKeys: [],
  retries: 0,
  sunk: [],
});

type Attempt =
  | { kind: "done"; out?: string; children?: string[]; sunk?: string }
  | { kind: "failed"; retryable: boolean }
  | { kind: "incomplete" };

/** One attempt of `route`'s chain on `key`; `healed`: every rule passes (a replay with failures fixed). */
function attempt(route: RouteShape, key: string, n: number, healed: boolean): Attempt {
  const { h } = bodyOf(key);
  for (const step of route.steps) {
    switch (step.kind) {
      case "passthrough":
        break;
      case "filter":
        if (!step.keep.includes(h)) return { kind: "done" };
        break;
      case "rule": {
        if (healed) break;
        const fate = fateOf(step.salt, step.mix, key);
        if (fate.kind === "empty") return { kind: "done" };
        if (fate.kind === "permanent") return { kind: "failed", retryable: false };
        if ((fate.kind === "transient" || fate.kind === "throw") && n <= fate.times)
          return { kind: "failed", retryable: true };
        if (fate.kind === "timeout" && n <= fate.times) return { kind: "incomplete" };
        break;
      }
      case "fan":
        return { kind: "done", children: Array.from({ length: step.count }, (_, i) => `${key}.${i}`) };
      case "batch":
        // Held, then emitted inside a batch whose items reach the sink: flattened, the same keys.
        break;
      case "sink":
        return { kind: "done", sunk: key };
    }
  }
  return { kind: "done", out: key };
}

/**
 * The expected outcome of running `shape` with `inputs` delivered to `start` (the init message at the
 * first route by default), computed from the config and the rules alone.
 */
export function expectedOutcome(
  shape: Shape,
  options: {
    start?: string;
    inputs?: readonly string[];
    healed?: boolean;
    /** Told of every delivery the model makes, in order. */
    onArrival?: (route: string, key: string) => void;
  } = {},
): Expected {
  const routes: Record<string, RouteOutcome> = {};
  const byName = new Map(shape.routes.map((r) => [r.name, r]));
  for (const r of shape.routes) routes[r.name] = empty();
  const start = options.start ?? shape.routes[0]?.name;
  if (start === undefined) throw new Error("a shape has at least one route");
  const work: { route: string; key: string }[] = (options.inputs ?? [ROOT_KEY]).map((key) => ({
    route: start,
    key,
  }));
  const healed = options.healed ?? false;
  while (work.length > 0) {
    const item = work.shift() as { route: string; key: string };
    const route = byName.get(item.route) as RouteShape;
    const o = routes[route.name] as RouteOutcome;
    o.arrived++;
    options.onArrival?.(route.name, item.key);
    if (route.condition !== undefined && !route.condition.includes(bodyOf(item.key).h)) {
      o.skipped++;
      continue;
    }
    for (let n = 1; ; n++) {
      const result = attempt(route, item.key, n, healed);
      if (result.kind === "done") {
        o.completed++;
        if (result.sunk !== undefined) o.sunk.push(result.sunk);
        const sent = result.children ?? (result.out === undefined ? [] : [result.out]);
        for (const key of sent) for (const next of route.outbound) work.push({ route: next, key });
        break;
      }
      const last = n >= shape.maxAttempts;
      if (result.kind === "failed" && !result.retryable) {
        o.dead.rejected++;
        o.deadKeys.push(item.key);
        break;
      }
      if (last) {
        o.dead[result.kind === "incomplete" ? "incomplete" : "exhausted"]++;
        o.deadKeys.push(item.key);
        break;
      }
      o.retries++;
    }
  }
  for (const o of Object.values(routes)) {
    o.sunk.sort();
    o.deadKeys.sort();
  }
  return { routes, status: "completed" };
}

/** How many messages the shape moves in all (for budgeting: big shapes run fewer cases). */
export function totalArrivals(expected: Expected): number {
  return Object.values(expected.routes).reduce((sum, o) => sum + o.arrived, 0);
}
