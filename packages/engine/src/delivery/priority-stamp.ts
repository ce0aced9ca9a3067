import {
  type MessageValueSource,
  type OutboundMessage,
  type PipelineConfig,
  type PublishReceipt,
  parseDestination,
  type QueueProtocol,
  readMessageValue,
} from "@factflow/protocols";

/** Queue name → where the priority of a message published to it comes from. */
export function priorityRules(config: PipelineConfig): Map<string, MessageValueSource> {
  const rules = new Map<string, MessageValueSource>();
  for (const route of Object.values(config.routes)) {
    const from = route.inbound.priority?.from;
    if (from !== undefined && from !== "adapter") rules.set(route.inbound.queue, from);
  }
  return rules;
}

/** A priority read from a message: an integer 0–9 (numbers and numeric strings), else undefined. */
export function priorityOf(value: unknown): number | undefined {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  if (typeof n !== "number" || !Number.isFinite(n)) return undefined;
  return Math.min(9, Math.max(0, Math.round(n)));
}

/**
 * Wraps the execution's queue so a message published to a queue whose route reads its priority from
 * a payload field or header (`priority.from`) carries that priority. A priority the adapter set
 * itself wins; a missing or non-numeric value leaves the message at the default priority.
 */
export function withPriorityStamp(
  queue: QueueProtocol,
  rules: ReadonlyMap<string, MessageValueSource>,
): QueueProtocol {
  if (rules.size === 0) return queue;
  return {
    name: queue.name,
    capabilities: queue.capabilities,
    admin: queue.admin,
    connect: () => queue.connect(),
    close: () => queue.close(),
    subscribe: (destination, handler, options) => queue.subscribe(destination, handler, options),
    counters: () => queue.counters(),
    publish(destination: string, message: OutboundMessage): Promise<PublishReceipt> {
      if (message.priority === undefined) {
        const parsed = parseDestination(destination);
        const rule = "error" in parsed || parsed.kind !== "queue" ? undefined : rules.get(parsed.name);
        const priority =
          rule === undefined ? undefined : priorityOf(readMessageValue(rule, message.body, message.headers));
        if (priority !== undefined) return queue.publish(destination, { ...message, priority });
      }
      return queue.publish(destination, message);
    },
  };
}
