import type { Expected, RouteOutcome } from "./oracle.js";
import type { Observed } from "./runner.js";
import type { Shape } from "./shape.js";

/**
 * An upper bound on how long a finished execution may take to notice it is done, from its config:
 * the longest batch timer (a held batch waits for its timer or the route's drain) plus a margin for a
 * loaded machine. A hang detector, not a speed check.
 */
export function settleBoundMs(shape: Shape): number {
  let longest = 0;
  for (const route of shape.routes)
    for (const step of route.steps)
      if (step.kind === "batch" && step.timeoutMs < 600_000) longest = Math.max(longest, step.timeoutMs);
  return longest + 30_000;
}

/** The parts of a route's outcome the oracle predicts exactly. */
function comparable(o: RouteOutcome) {
  return {
    arrived: o.arrived,
    skipped: o.skipped,
    completed: o.completed,
    dead: o.dead,
    deadKeys: o.deadKeys,
    retries: o.retries,
    sunk: o.sunk,
  };
}

/** Everything that differs between what the oracle expects and what the run did, as readable lines. */
export function differences(shape: Shape, expected: Expected, observed: Observed): string[] {
  const out: string[] = [];
  if (observed.status !== expected.status)
    out.push(`status: expected ${expected.status}, got ${observed.status}`);
  for (const route of shape.routes) {
    const want = comparable(expected.routes[route.name] as RouteOutcome);
    const got = comparable(observed.routes[route.name] ?? (expected.routes[route.name] as RouteOutcome));
    for (const key of Object.keys(want) as (keyof typeof want)[]) {
      const a = JSON.stringify(want[key]);
      const b = JSON.stringify(got[key]);
      if (a !== b)
        out.push(`route ${route.name} ${key}: expected ${a.slice(0, 300)}, got ${b.slice(0, 300)}`);
    }
    const dead = Object.values(want.dead).reduce((sum, n) => sum + n, 0);
    const held = observed.brokerDead[route.name] ?? 0;
    if (held !== dead)
      out.push(`route ${route.name}: the broker holds ${held} dead letters, expected ${dead}`);
  }
  for (const name of Object.keys(observed.routes))
    if (!shape.routes.some((r) => r.name === name))
      out.push(`lineage names a route the config lacks: ${name}`);
  if (observed.leftovers.length > 0) out.push(`left in the broker: ${observed.leftovers.join("; ")}`);
  const bound = settleBoundMs(shape);
  if (observed.settleMs > bound)
    out.push(`completed ${observed.settleMs} ms after its last hop (bound ${bound} ms)`);
  return out;
}
