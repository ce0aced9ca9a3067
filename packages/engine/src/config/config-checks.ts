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
    const condition = route.condition;
    if (condition !== undefined && "adapter" in condition && registry.get(condition.adapter) === undefined) {
      issues.push({
        path: ["routes", name, "condition", "adapter"],
        message: `unknown condition adapter "${condition.adapter}". Known adapters: ${registry.types().join(", ")}. Register it in a module listed in adapter_modules`,
      });
    }
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
      issues.push(
        ...checkHolding(config, name, index, definition.holdsMessagesMs?.(adapter.config as JsonObject)),
      );
      const step = adapter.condition;
      if (step !== undefined && "adapter" in step && registry.get(step.adapter) === undefined) {
        issues.push({
          path: ["routes", name, "adapters", index, "condition", "adapter"],
          message: `unknown condition adapter "${step.adapter}". Known adapters: ${registry.types().join(", ")}. Register it in a module listed in adapter_modules`,
        });
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
 * A fan-in adapter keeps each message unsettled while it holds it. On an ordered route the held
 * message stops the messages behind it from being delivered, so the batch never fills and waits for
 * its timer every time; and the route's handler timeout keeps running while a message is held, so a
 * timeout no longer than the hold aborts held messages and dead-letters them as incomplete.
 */
function checkHolding(
  config: PipelineConfig,
  route: string,
  index: number,
  holdMs: number | undefined,
): RawIssue[] {
  if (holdMs === undefined) return [];
  const { inbound, adapters } = config.routes[route] as PipelineConfig["routes"][string];
  const type = adapters[index]?.type ?? "";
  const issues: RawIssue[] = [];
  if (inbound.ordering === "fifo" || inbound.group_by !== undefined) {
    issues.push({
      path: ["routes", route, "adapters", index, "type"],
      message: `adapter "${type}" holds messages until it emits, which blocks a route with ${inbound.ordering === "fifo" ? "ordering: fifo" : "group_by"}: the messages behind a held one are never delivered. Remove the ordering from route "${route}", or move "${type}" to a route without one`,
    });
  }
  const timeoutMs = inbound.timeout_ms ?? config.settings.handler_timeout_ms;
  if (timeoutMs <= holdMs) {
    issues.push({
      path: ["routes", route, "adapters", index, "config"],
      message: `adapter "${type}" may hold a message for ${holdMs} ms, but route "${route}" aborts a handler after ${timeoutMs} ms (timeout_ms), and a held message counts as running: raise the route's timeout_ms above ${holdMs} or shorten the adapter's timeout_ms`,
    });
  }
  return issues;
}

/**
 * A route "can end" when it has no outbound queue, contains an adapter that may end the chain, or
 * feeds a route that can end. A cycle whose routes all cannot end would circulate forever. Linear
 * and iterative: configs with thousands of routes are checked in milliseconds, without recursion.
 */
function findEndlessCycles(
  config: PipelineConfig,
  readerOf: ReadonlyMap<string, string>,
  registry?: AdapterRegistry,
): RawIssue[] {
  const next = new Map<string, string[]>();
  const feeders = new Map<string, string[]>();
  for (const [name, route] of Object.entries(config.routes)) {
    const targets = route.outbound.map((q) => readerOf.get(q)).filter((r): r is string => r !== undefined);
    next.set(name, targets);
    for (const target of targets) {
      const list = feeders.get(target);
      if (list === undefined) feeders.set(target, [name]);
      else list.push(name);
    }
  }
  // Spread "can end" backwards from the routes that end by themselves.
  const canEnd = new Set<string>();
  const work: string[] = [];
  for (const [name, route] of Object.entries(config.routes)) {
    const filters = route.adapters.some((a) => registry?.get(a.type)?.mayEndChain === true);
    if (route.outbound.length === 0 || filters) {
      canEnd.add(name);
      work.push(name);
    }
  }
  for (let route = work.pop(); route !== undefined; route = work.pop()) {
    for (const feeder of feeders.get(route) ?? []) {
      if (!canEnd.has(feeder)) {
        canEnd.add(feeder);
        work.push(feeder);
      }
    }
  }
  // Every target of a route that cannot end cannot end either, so following any target from such
  // a route must come back to a route already on the walk: that loop is the cycle to report.
  const issues: RawIssue[] = [];
  const visited = new Set<string>();
  for (const start of next.keys()) {
    if (canEnd.has(start) || visited.has(start)) continue;
    const walk: string[] = [];
    const onWalk = new Map<string, number>();
    let node: string | undefined = start;
    while (node !== undefined && !visited.has(node)) {
      visited.add(node);
      onWalk.set(node, walk.length);
      walk.push(node);
      node = next.get(node)?.[0];
    }
    const at = node === undefined ? undefined : onWalk.get(node);
    if (at === undefined) continue;
    const cycle = walk.slice(at);
    const first = cycle[0] as string;
    const shown = cycle.length > 10 ? [...cycle.slice(0, 10), `... ${cycle.length - 10} more`] : cycle;
    issues.push({
      path: ["routes", first, "outbound"],
      message: `routes ${shown.map((r) => `"${r}"`).join(" → ")} → "${first}" form a cycle with no way out: add a route without outbound queues reachable from it, or an adapter that ends the chain (e.g. filter)`,
    });
  }
  return issues;
}
