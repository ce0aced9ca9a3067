import type { SubscribeOptions } from "@factflow/protocols";
import { resolveSubscribeOptions, SubscribeFieldsSchema } from "@factflow/provider-kit";
import * as v from "valibot";
import { invalidInput, PROVIDER_NAME } from "./errors.js";

/** How a physical queue orders its messages. */
export interface QueueLayout {
  readonly ordering: "none" | "fifo";
  /** Body field (top-level or dotted path) naming the FIFO group (only with `ordering: "fifo"`). */
  readonly groupBy: string | undefined;
  /** Header naming the FIFO group, instead of `groupBy`. */
  readonly groupByHeader?: string | undefined;
  /** Set when the queue is a priority queue. */
  readonly maxPriority: number | undefined;
}

export const DEFAULT_LAYOUT: QueueLayout = Object.freeze({
  ordering: "none",
  groupBy: undefined,
  maxPriority: undefined,
});

const field = SubscribeFieldsSchema.entries;
// In the order earlier versions wrote definitions to the log, so an unchanged definition compares equal.
const fields = {
  ordering: field.ordering,
  groupBy: field.groupBy,
  maxPriority: field.maxPriority,
  prefetch: field.prefetch,
  concurrency: field.concurrency,
  handlerTimeoutMs: field.handlerTimeoutMs,
  retry: field.retry,
  groupByHeader: field.groupByHeader,
};
const FIELD_NAMES = Object.keys(fields).join(", ");

/**
 * Options of `defineQueue`: the queue's layout, plus defaults for subscriptions that do not set their
 * own (the durable worker's named queue configs: type, group field, concurrency, retries, timeout).
 * Each field takes exactly what the subscribe option of the same name takes (the kit's
 * `SubscribeFieldsSchema`), with the same limits and messages.
 */
export const QueueDefinitionSchema = v.strictObject(fields, (issue) =>
  issue.expected === "never"
    ? `unknown field ${issue.path?.map((p) => String(p.key)).join(".") ?? ""}: a queue definition takes ${FIELD_NAMES}`
    : 'a queue definition must be an object like { ordering: "fifo", groupBy: "session" }',
);

/** What `defineQueue` accepts. */
export type QueueDefinition = v.InferOutput<typeof QueueDefinitionSchema>;

/** Every capability: the embedded provider honours all of them. */
const ALL_CAPABILITIES = { fifo: true, messageGroups: true, priorities: true, orderedGroups: true } as const;

/**
 * Validates a queue definition: each field as the subscribe option of the same name, and together
 * as a subscription's options are (concurrency at most prefetch, groupBy only with FIFO). Throws
 * `invalid_argument` naming every problem.
 */
export function parseDefinition(destination: string, input: unknown): QueueDefinition {
  const operation = `defineQueue of "${destination}"`;
  const result = v.safeParse(QueueDefinitionSchema, input ?? {});
  if (!result.success) {
    throw invalidInput("invalid_argument", `${operation}: ${result.issues.map((i) => i.message).join("; ")}`);
  }
  const asOptions = { ...result.output, subscription: "definition" } as SubscribeOptions;
  resolveSubscribeOptions(asOptions, ALL_CAPABILITIES, {
    provider: PROVIDER_NAME,
    operation,
  });
  return result.output;
}

/** The layout after applying the layout fields a caller set explicitly. */
export function mergeLayout(
  current: QueueLayout,
  explicit: {
    ordering?: "none" | "fifo" | undefined;
    groupBy?: string | undefined;
    groupByHeader?: string | undefined;
    maxPriority?: number | undefined;
  },
): QueueLayout {
  const keyed = explicit.groupBy !== undefined || explicit.groupByHeader !== undefined;
  const keep = !keyed && explicit.ordering !== "none";
  const groupByHeader = explicit.groupByHeader ?? (keep ? current.groupByHeader : undefined);
  return {
    ordering: explicit.ordering ?? current.ordering,
    groupBy: explicit.groupBy ?? (keep ? current.groupBy : undefined),
    ...(groupByHeader === undefined ? {} : { groupByHeader }),
    maxPriority: explicit.maxPriority ?? current.maxPriority,
  };
}

export function sameLayout(a: QueueLayout, b: QueueLayout): boolean {
  return (
    a.ordering === b.ordering &&
    a.groupBy === b.groupBy &&
    a.groupByHeader === b.groupByHeader &&
    a.maxPriority === b.maxPriority
  );
}
