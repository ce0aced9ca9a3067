import type { JsonObject, PipelineConfig } from "@factflow/protocols";
import type { AdapterRegistry } from "./adapter-registry.js";

/** A config issue before its line is looked up: the path as segments. */
export interface RawIssue {
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/**
 * Checks a schema-valid config for problems the schema cannot see: unknown adapter types, adapter
 * configs their definition rejects, duplicate inbound queues, outbound queues nobody reads, an
 * unknown init route, and route cycles that can never terminate. Returns every problem found.
 */
export function checkPipelineSemantics(config: PipelineConfig, registry?: AdapterRegistry): RawIssue[] {
  const issues: RawIssue[] = [];
  const routeNames = Object.keys(config.routes);
  const readerOf = new Map<string, string>();

  for (const [name, route] of Object.entries(config.routes)) {
    const other = readerOf.get(route.inbound.queue);
    if (other !== undefined) {
      issues.push({
        path: ["routes", name, "inbound", "queue"],
        message: `queue "${route.inbound.queue}" is already the inbound queue of route "${other}"; every route needs its own inbound queue`,
      });
    } else {
      readerOf.set(route.inbound.queue, name);
    }
    if (registry === undefined) continue;
    route.adapters.forEach((adapter, index) => {
      const definition = registry.get(adapter.type);
      if (definition === undefined) {
        issues.push({
          path: ["routes", name, "adapters", index, "type"],
          message: `unknown adapter "${adapter.type}". Known adapters: ${registry.types().join(", ")}. Add a module exporting it to adapter_modules if it is your own`,
        });
        return;
      }
      for (const problem of definition.validateConfig?.(adapter.config as JsonObject) ?? []) {
        issues.push({ path: ["routes", name, "adapters", index, "config"], message: problem });
      }
    });
  }

  for (const [name, route] of Object.entries(config.routes)) {
    route.outbound.forEach((queue, index) => {
      if (!readerOf.has(queue)) {
        issues.push({
          path: ["routes", name, "outbound", index],
          message: `no route reads outbound queue "${queue}"; messages sent there would never be consumed. Known inbound queues: ${[...readerOf.keys()].join(", ")}`,
        });
      }
    });
  }

  if (config.routes[config.init.route] === undefined) {
    issues.push({
      path: ["init", "route"],
      message: `init route "${config.init.route}" does not exist. Routes: ${routeNames.join(", ")}`,
    });
  }

  issues.push(...findEndlessCycles(config, readerOf, registry));
  return issues;
}

/**
 * A route "can end" when it has no outbound queue, contains an adapter that may end the chain, or
 * feeds a route that can end. A cycle whose routes all cannot end would circulate forever.
 */
function findEndlessCycles(
  config: PipelineConfig,
  readerOf: ReadonlyMap<string, string>,
  registry?: AdapterRegistry,
): RawIssue[] {
  const next = new Map<string, string[]>();
  for (const [name, route] of Object.entries(config.routes)) {
    next.set(
      name,
      route.outbound.map((q) => readerOf.get(q)).filter((r): r is string => r !== undefined),
    );
  }
  const canEnd = new Set<string>();
  for (const [name, route] of Object.entries(config.routes)) {
    const filters = route.adapters.some((a) => registry?.get(a.type)?.mayEndChain === true);
    if (route.outbound.length === 0 || filters) canEnd.add(name);
  }
  let changed = true;
  while (changed) {
    changed = false;
    for (const [name, targets] of next) {
      if (!canEnd.has(name) && targets.some((t) => canEnd.has(t))) {
        canEnd.add(name);
        changed = true;
      }
    }
  }
  const issues: RawIssue[] = [];
  const reported = new Set<string>();
  for (const start of next.keys()) {
    if (canEnd.has(start) || reported.has(start)) continue;
    const cycle = findCycleFrom(start, next);
    if (cycle === undefined) continue;
    for (const r of cycle) reported.add(r);
    issues.push({
      path: ["routes", start, "outbound"],
      message: `routes ${cycle.map((r) => `"${r}"`).join(" → ")} → "${cycle[0]}" form a cycle with no way out: add a route without outbound queues reachable from it, or an adapter that ends the chain (e.g. filter)`,
    });
  }
  return issues;
}

function findCycleFrom(start: string, next: ReadonlyMap<string, string[]>): string[] | undefined {
  const path: string[] = [];
  const onPath = new Set<string>();
  const seen = new Set<string>();
  const visit = (node: string): string[] | undefined => {
    if (onPath.has(node)) return path.slice(path.indexOf(node));
    if (seen.has(node)) return undefined;
    seen.add(node);
    onPath.add(node);
    path.push(node);
    for (const target of next.get(node) ?? []) {
      const found = visit(target);
      if (found) return found;
    }
    path.pop();
    onPath.delete(node);
    return undefined;
  };
  return visit(start);
}
