import { overrideInbound, ProviderError, type QueueDefinition, type RouteConfig } from "@factflow/protocols";
import type { FactflowRuntime } from "@factflow/runtime";

/** How many running executions `GET /queues/{name}` reports at most. */
const MAX_EXECUTIONS = 100;

/**
 * A named queue as `GET /api/v1/queues/{name}` shows it: the stored definition, and for every running
 * execution with a route reading the queue, its broker stats and the effective settings.
 */
export async function namedQueueStatus(
  rt: FactflowRuntime,
  name: string,
  definition: QueueDefinition | undefined,
) {
  const running = await rt.executions.listExecutions({
    status: "running",
    limit: MAX_EXECUTIONS,
    includeInput: false,
  });
  const executions = [];
  for (const execution of running.items) {
    const entry = Object.entries(execution.configSnapshot.routes).find(
      ([, route]) => route.inbound.queue === name,
    );
    if (entry === undefined) continue;
    const [routeName, route] = entry as [string, RouteConfig];
    const effective = definition === undefined ? route.inbound : overrideInbound(route.inbound, definition);
    const destination = `/queue/${execution.id}/${name}`;
    let stats = null;
    try {
      const s = await rt.provider.admin.stats({ destination });
      stats = { depth: s.depth, consumers: s.consumers, in_flight: s.inFlight, dlq_depth: s.dlqDepth };
    } catch (error) {
      if (!(error instanceof ProviderError && error.reason === "not-found")) throw error;
    }
    executions.push({
      execution_id: execution.id,
      route: routeName,
      destination,
      ...(stats ?? { depth: 0, consumers: 0, in_flight: 0, dlq_depth: 0 }),
      effective: { ...effective, retry: definition?.retry ?? route.retry ?? null },
    });
  }
  return {
    name,
    provider: rt.provider.name,
    definition: definition ?? null,
    executions,
  };
}
