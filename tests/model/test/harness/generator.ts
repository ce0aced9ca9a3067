import fc from "fast-check";
import { expectedOutcome, totalArrivals } from "./oracle.js";
import type { FateMix, RouteShape, Shape, Step } from "./shape.js";

/** What the provider under test can do: a shape never asks for more. */
export interface ShapeLimits {
  readonly priorities: boolean;
  readonly fifo: boolean;
  readonly orderedGroups: boolean;
  /** Messages a case may move in all; fan-out counts are cut down until the shape fits. */
  readonly maxArrivals: number;
}

const MIXES: Record<string, FateMix> = {
  clean: { ok: 100, empty: 0, transient: 0, permanent: 0, throw: 0, timeout: 0 },
  flaky: { ok: 60, empty: 0, transient: 40, permanent: 0, throw: 0, timeout: 0 },
  mixed: { ok: 55, empty: 10, transient: 15, permanent: 10, throw: 10, timeout: 0 },
  hostile: { ok: 30, empty: 10, transient: 20, permanent: 20, throw: 20, timeout: 0 },
  slow: { ok: 85, empty: 0, transient: 0, permanent: 0, throw: 0, timeout: 15 },
};

/** Buckets a condition or filter keeps: usually most of them, so a few messages drop at each. */
const bucketSet = fc
  .uniqueArray(fc.integer({ min: 0, max: 9 }), { minLength: 4, maxLength: 9 })
  .map((b) => b.sort((x, y) => x - y));

const preStep: fc.Arbitrary<Step> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<Step>({ kind: "passthrough" }) },
  {
    weight: 4,
    arbitrary: fc
      .record({ salt: fc.nat({ max: 1_000_000 }), mix: fc.constantFrom(...Object.keys(MIXES)) })
      .map(({ salt, mix }): Step => ({ kind: "rule", salt, mix: MIXES[mix] as FateMix })),
  },
  { weight: 1, arbitrary: bucketSet.map((keep): Step => ({ kind: "filter", keep })) },
);

/** Mostly small fan-outs, sometimes up to 50 children. */
const fanCount = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 6 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 50 }) },
);

interface RouteDraft {
  readonly pre: Step[];
  readonly fan: number | undefined;
  readonly batch: { size: number; timeoutMs: number } | undefined;
  readonly targets: number[];
  readonly condition: number[] | undefined;
  readonly concurrency: number;
  readonly prefetch: number | undefined;
  readonly order: "none" | "fifo" | "groups" | "priority";
  readonly namedQueue: boolean;
}

const routeDraft = fc.record({
  pre: fc.array(preStep, { maxLength: 2 }),
  fan: fc.option(fanCount, { nil: undefined, freq: 2 }),
  batch: fc.option(
    fc.record({
      size: fc.integer({ min: 1, max: 8 }),
      timeoutMs: fc.constantFrom(50, 200, 1_000, 600_000),
    }),
    { nil: undefined, freq: 3 },
  ),
  // Picks among the later routes, resolved once the route count is known; an empty list (about one
  // route in six) makes a terminal route in the middle of the pipeline.
  targets: fc.option(fc.uniqueArray(fc.nat({ max: 1000 }), { minLength: 1, maxLength: 3 }), {
    nil: [],
    freq: 6,
  }),
  condition: fc.option(bucketSet, { nil: undefined, freq: 4 }),
  concurrency: fc.integer({ min: 1, max: 4 }),
  prefetch: fc.option(fc.integer({ min: 1, max: 20 }), { nil: undefined, freq: 3 }),
  order: fc.constantFrom<RouteDraft["order"]>("none", "none", "none", "fifo", "groups", "priority"),
  namedQueue: fc.boolean(),
});

/**
 * Outbound route indexes per route: each pick names a later route; a route nobody sends to is fed by
 * the route just before it, so every route of a shape can receive messages.
 */
function wire(drafts: readonly RouteDraft[]): number[][] {
  const count = drafts.length;
  const outbound = drafts.map((d, i) =>
    i === count - 1 ? [] : [...new Set(d.targets.map((t) => i + 1 + (t % (count - i - 1))))],
  );
  for (let j = 1; j < count; j++)
    if (!outbound.some((targets) => targets.includes(j))) (outbound[j - 1] as number[]).push(j);
  return outbound.map((targets) => targets.sort((a, b) => a - b));
}

function buildRoute(
  draft: RouteDraft,
  index: number,
  targets: readonly number[],
  limits: ShapeLimits,
): RouteShape {
  const outbound = targets.map((t) => `r${t}`);
  const terminal = outbound.length === 0;
  const batch = terminal ? draft.batch : undefined;
  // A route with a batch takes up to `concurrency` + batch size deliveries at once, and those beyond
  // `concurrency` wait for a slot inside their handler timeout (docs/engine.md): whether they time
  // out depends on timing, which no oracle can predict, so such routes get no rule that times out.
  const steps: Step[] =
    batch === undefined
      ? [...draft.pre]
      : draft.pre.map((s) =>
          s.kind === "rule" && s.mix.timeout > 0 ? { ...s, mix: MIXES.mixed as FateMix } : s,
        );
  const slow = steps.some((s) => s.kind === "rule" && s.mix.timeout > 0);
  if (terminal) {
    if (batch !== undefined) steps.push({ kind: "batch", size: batch.size, timeoutMs: batch.timeoutMs });
    steps.push({ kind: "sink" });
  } else if (draft.fan !== undefined) {
    steps.push({ kind: "fan", count: draft.fan });
  } else if (steps.length === 0) {
    steps.push({ kind: "passthrough" });
  }
  // A batch holds messages, which an ordered route cannot do (config validation refuses it).
  const order =
    ((draft.order === "fifo" || draft.order === "groups") && batch !== undefined) ||
    (draft.order === "fifo" && !limits.fifo) ||
    (draft.order === "groups" && !limits.orderedGroups) ||
    (draft.order === "priority" && !limits.priorities)
      ? "none"
      : draft.order;
  return {
    name: `r${index}`,
    queue: `q.r${index}`,
    ...(draft.condition === undefined ? {} : { condition: draft.condition }),
    steps,
    outbound,
    concurrency: draft.concurrency,
    ...(draft.prefetch === undefined ? {} : { prefetch: draft.prefetch }),
    ...(order === "fifo" ? { ordering: "fifo" as const } : {}),
    ...(order === "groups" ? { groupByBucket: true } : {}),
    ...(order === "priority" ? { priorityLevels: 3 } : {}),
    // Long enough that a healthy handler on a loaded machine never reaches it; only a timing-out
    // rule does.
    ...(slow ? { timeoutMs: 500 } : {}),
    namedQueue: draft.namedQueue,
  };
}

/** Cuts the largest fan-outs down until the shape moves at most `max` messages. */
function fitBudget(shape: Shape, max: number): Shape {
  let current = shape;
  for (;;) {
    if (totalArrivals(expectedOutcome(current)) <= max) return current;
    let largest: { route: number; step: number; count: number } | undefined;
    for (const [r, route] of current.routes.entries())
      for (const [s, step] of route.steps.entries())
        if (step.kind === "fan" && step.count > 0 && (largest === undefined || step.count > largest.count))
          largest = { route: r, step: s, count: step.count };
    if (largest === undefined) return current;
    const { route: r, step: s, count } = largest;
    current = {
      ...current,
      routes: current.routes.map((route, i) =>
        i !== r
          ? route
          : {
              ...route,
              steps: route.steps.map((step, j) =>
                j === s ? { kind: "fan" as const, count: Math.floor(count / 2) } : step,
              ),
            },
      ),
    };
  }
}

/** Random valid pipelines of 1–8 routes within what the provider can do. */
export function shapeArbitrary(limits: ShapeLimits): fc.Arbitrary<Shape> {
  return fc
    .record({
      routes: fc.array(routeDraft, { minLength: 1, maxLength: 8 }),
      maxAttempts: fc.integer({ min: 1, max: 3 }),
      initialDelayMs: fc.constantFrom(5, 10, 30),
      // The first route fans out more often than not: most real pipelines start by splitting a document.
      firstFan: fc.option(fanCount, { nil: undefined, freq: 5 }),
    })
    .map(({ routes, maxAttempts, initialDelayMs, firstFan }) => {
      // The first route gets no condition or filter and one rule at most: one unlucky init message
      // would otherwise end most shapes at their first hop.
      const drafts = routes.map((d, i) =>
        i !== 0
          ? d
          : {
              ...d,
              condition: undefined,
              pre: d.pre.filter((step) => step.kind !== "filter").slice(0, 1),
              fan: d.fan ?? firstFan,
            },
      );
      const wiring = wire(drafts);
      const shape: Shape = {
        name: "model",
        routes: drafts.map((d, i) => buildRoute(d, i, wiring[i] as number[], limits)),
        maxAttempts,
        initialDelayMs,
      };
      return fitBudget(shape, limits.maxArrivals);
    });
}
