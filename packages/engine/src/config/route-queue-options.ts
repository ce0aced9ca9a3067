import type {
  PipelineConfig,
  ProviderCapabilities,
  RouteConfig,
  SubscribeOptions,
} from "@factflow/protocols";
import type { RawIssue } from "./config-checks.js";

/** The subscribe options a route's effective queue settings ask of the provider. */
export type RouteQueueOptions = Pick<
  SubscribeOptions,
  "ordering" | "groupBy" | "groupByHeader" | "maxPriority" | "handlerTimeoutMs" | "deadLetter"
>;

/**
 * Maps a route's inbound settings (already merged with its `queues:` definition) onto subscribe
 * options: `group_by` → `groupBy` (payload path) or `groupByHeader`, `priority.max` → `maxPriority`,
 * `timeout_ms` (else the pipeline's `handler_timeout_ms`) → `handlerTimeoutMs`, `dead_letter`.
 */
export function routeQueueOptions(route: RouteConfig, pipelineTimeoutMs: number): RouteQueueOptions {
  const inbound = route.inbound;
  const group = inbound.group_by;
  return {
    ordering: inbound.ordering,
    ...(group === undefined
      ? {}
      : "field" in group
        ? { groupBy: group.field }
        : { groupByHeader: group.header }),
    ...(inbound.priority === undefined ? {} : { maxPriority: inbound.priority.max }),
    handlerTimeoutMs: inbound.timeout_ms ?? pipelineTimeoutMs,
    deadLetter: inbound.dead_letter,
  };
}

/**
 * What the provider cannot do that the pipeline asks for. A capability a provider does not declare
 * counts as unsupported (`orderedGroups` left out rejects `group_by`), so a pipeline is refused up
 * front instead of losing its ordering or priorities silently.
 */
export function checkQueueCapabilities(
  config: PipelineConfig,
  capabilities: ProviderCapabilities,
  provider: string,
): RawIssue[] {
  const issues: RawIssue[] = [];
  for (const [name, route] of Object.entries(config.routes)) {
    const inbound = route.inbound;
    if (inbound.group_by !== undefined && capabilities.orderedGroups !== true) {
      issues.push({
        path: ["routes", name, "inbound", "group_by"],
        message: `the ${provider} provider does not support ordered message groups (capabilities.orderedGroups is not true): remove group_by (ordering: fifo alone handles one message at a time), or run on a provider that supports them (embedded, rabbitmq, artemis, pulsar)`,
      });
    }
    if (inbound.ordering === "fifo" && !capabilities.fifo) {
      issues.push({
        path: ["routes", name, "inbound", "ordering"],
        message: `the ${provider} provider does not support FIFO queues (capabilities.fifo is false): remove ordering: fifo, or use another provider`,
      });
    }
    if (inbound.priority !== undefined && !capabilities.priorities) {
      issues.push({
        path: ["routes", name, "inbound", "priority"],
        message: `the ${provider} provider does not support priority queues (capabilities.priorities is false): remove priority (messages are then handled in publish order), or use a provider that supports it`,
      });
    }
  }
  return issues;
}
