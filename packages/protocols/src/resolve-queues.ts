import type {
  ParsedPipelineConfig,
  PipelineConfig,
  QueueDefinition,
  RouteConfig,
} from "./pipeline-config.js";
import type { EffectiveQueueSettings } from "./queue-definition.js";
import { DEFAULT_PREFETCH } from "./subscribe-options.js";

/** Queue settings as written: every field may be missing. */
type Settings = { readonly [K in keyof EffectiveQueueSettings]?: EffectiveQueueSettings[K] | undefined };

/**
 * Merges one route's inbound settings with a queue definition: the route's own value wins, then the
 * definition's, then the defaults (`concurrency` 1, `prefetch` 10 or `concurrency` when larger,
 * `ordering` "none", `dead_letter` true).
 */
export function effectiveQueueSettings(
  route: Settings,
  definition: Settings | undefined,
): EffectiveQueueSettings {
  const pick = <K extends keyof Settings>(key: K): Settings[K] | undefined => route[key] ?? definition?.[key];
  const concurrency = pick("concurrency") ?? 1;
  const groupBy = pick("group_by");
  const priority = pick("priority");
  const timeout = pick("timeout_ms");
  return {
    concurrency,
    prefetch: pick("prefetch") ?? Math.max(DEFAULT_PREFETCH, concurrency),
    // A group key makes the queue FIFO per group.
    ordering: groupBy === undefined ? (pick("ordering") ?? "none") : "fifo",
    ...(groupBy === undefined ? {} : { group_by: groupBy }),
    ...(priority === undefined ? {} : { priority }),
    ...(timeout === undefined ? {} : { timeout_ms: timeout }),
    dead_letter: pick("dead_letter") ?? true,
  };
}

/** Fills every route's effective queue settings and retry from its queue definition (the schema's last step). */
export function applyQueueDefinitions(config: ParsedPipelineConfig): PipelineConfig {
  const routes: Record<string, RouteConfig> = {};
  for (const [name, route] of Object.entries(config.routes)) {
    const definition = config.queues[route.inbound.queue];
    const retry = route.retry ?? definition?.retry;
    routes[name] = {
      ...route,
      inbound: { queue: route.inbound.queue, ...effectiveQueueSettings(route.inbound, definition) },
      ...(retry === undefined ? {} : { retry }),
    };
  }
  return { ...config, routes };
}

/**
 * A route's inbound with an operator's queue definition laid over it: every field the definition
 * sets wins (it is the last word on a live queue, e.g. `concurrency: 0` to pause it).
 */
export function overrideInbound(
  inbound: RouteConfig["inbound"],
  definition: QueueDefinition,
): RouteConfig["inbound"] {
  const { retry: _retry, ...settings } = definition;
  const set = Object.fromEntries(Object.entries(settings).filter(([, value]) => value !== undefined));
  const merged = effectiveQueueSettings(set, inbound);
  // A larger concurrency without its own prefetch widens the prefetch with it.
  const prefetch =
    set.prefetch === undefined ? Math.max(merged.prefetch, merged.concurrency) : merged.prefetch;
  return { queue: inbound.queue, ...merged, prefetch };
}
