import type { PipelineConfig } from "@factflow/protocols";

/**
 * Route names in flow order: from the init route along outbound queues (breadth first), then any
 * route not reached. Stored snapshots may not keep the YAML's key order (PostgreSQL JSONB sorts keys).
 */
/** The parts of a pipeline config the order depends on (a config, or its JSON from the API). */
type RouteGraph = {
  readonly init: Pick<PipelineConfig["init"], "route">;
  readonly routes: Readonly<
    Record<string, { readonly inbound: { readonly queue: string }; readonly outbound: readonly string[] }>
  >;
};

export function routeOrder(config: RouteGraph): string[] {
  const byQueue = new Map<string, string[]>();
  for (const [name, route] of Object.entries(config.routes)) {
    byQueue.set(route.inbound.queue, [...(byQueue.get(route.inbound.queue) ?? []), name]);
  }
  const order: string[] = [];
  const queue = [config.init.route];
  while (queue.length > 0) {
    const name = queue.shift() as string;
    const route = config.routes[name];
    if (route === undefined || order.includes(name)) continue;
    order.push(name);
    for (const out of route.outbound) queue.push(...(byQueue.get(out) ?? []));
  }
  for (const name of Object.keys(config.routes).sort()) if (!order.includes(name)) order.push(name);
  return order;
}
