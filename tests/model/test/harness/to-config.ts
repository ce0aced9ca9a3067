import { bodyOf, ROOT_KEY, type RouteShape, type Shape, type Step } from "./shape.js";

type Json = Record<string, unknown>;

function adaptersOf(step: Step, sinkFile: string | undefined): Json[] {
  switch (step.kind) {
    case "passthrough":
      return [{ type: "passthrough" }];
    case "rule":
      return [{ type: "model.rule", config: { salt: step.salt, mix: { ...step.mix } } }];
    case "filter":
      return [{ type: "filter", config: { field: "h", in: [...step.keep] } }];
    case "fan":
      return [
        { type: "model.expand", config: { count: step.count } },
        { type: "split", config: { field: "items" } },
      ];
    case "batch":
      return [{ type: "batch", config: { size: step.size, timeout_ms: step.timeoutMs } }];
    case "sink":
      return [{ type: "model.sink", ...(sinkFile === undefined ? {} : { config: { file: sinkFile } }) }];
  }
}

function queueSettings(route: RouteShape): Json {
  return {
    concurrency: route.concurrency,
    ...(route.prefetch === undefined ? {} : { prefetch: route.prefetch }),
    ...(route.ordering === undefined ? {} : { ordering: route.ordering }),
    ...(route.groupByBucket === true ? { group_by: { field: "h" } } : {}),
    ...(route.priorityLevels === undefined
      ? {}
      : { priority: { max: route.priorityLevels, from: { field: "h" } } }),
    ...(route.timeoutMs === undefined ? {} : { timeout_ms: route.timeoutMs }),
  };
}

/**
 * The pipeline config a user would write for `shape` (the object form of its YAML). For a run in
 * another process, `outside` names the adapter module to load and the file its sinks append to.
 */
export function toPipelineConfig(shape: Shape, outside?: { module: string; sinkFile: string }): Json {
  const byName = new Map(shape.routes.map((r) => [r.name, r]));
  const routes: Json = {};
  const queues: Json = {};
  for (const route of shape.routes) {
    const settings = queueSettings(route);
    if (route.namedQueue) queues[route.queue] = settings;
    routes[route.name] = {
      inbound: route.namedQueue ? { queue: route.queue } : { queue: route.queue, ...settings },
      ...(route.condition === undefined ? {} : { condition: { field: "h", in: [...route.condition] } }),
      adapters: route.steps.flatMap((step) => adaptersOf(step, outside?.sinkFile)),
      outbound: route.outbound.map((name) => (byName.get(name) as RouteShape).queue),
    };
  }
  const first = shape.routes[0] as RouteShape;
  return {
    name: shape.name,
    settings: {
      retry: {
        max_attempts: shape.maxAttempts,
        initial_delay_ms: shape.initialDelayMs,
        multiplier: 2,
        max_delay_ms: 200,
      },
    },
    init: { route: first.name, message: bodyOf(ROOT_KEY) },
    ...(Object.keys(queues).length === 0 ? {} : { queues }),
    routes,
    ...(outside === undefined ? {} : { adapter_modules: [outside.module] }),
  };
}
