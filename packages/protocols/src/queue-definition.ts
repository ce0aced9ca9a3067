import * as v from "valibot";
import { MAX_HANDLER_TIMEOUT_MS, MAX_PREFETCH } from "./subscribe-options.js";

/** Most priority levels a queue may declare (messages carry priority 0–9). */
export const MAX_PRIORITY_LEVELS = 10;

/** Largest `concurrency` of a route or a queue definition. */
export const MAX_ROUTE_CONCURRENCY = 1000;

const PATH = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;
/** A dotted path into a JSON payload, e.g. `customer.id`. */
const fieldPath = v.pipe(
  v.string(),
  v.regex(PATH, 'a field path is names joined by ".", e.g. "customer.id"'),
  v.maxLength(200),
);
const headerName = v.pipe(v.string(), v.minLength(1), v.maxLength(200));

/** Where a per-message value comes from: a payload field path or a message header. */
export const MessageValueSourceSchema = v.union(
  [v.strictObject({ field: fieldPath }), v.strictObject({ header: headerName })],
  'say where the value comes from: { field: "customer.id" } (payload path) or { header: "x-tenant" }',
);
export type MessageValueSource = v.InferOutput<typeof MessageValueSourceSchema>;

/**
 * A queue's priority: `max` levels (1–10), and where each message's priority comes from. `from:
 * adapter` (the default) takes what the publishing adapter set on the message; a field or header
 * is read from the message when it is published to this queue (0–9; missing or invalid values mean 0).
 */
export const PriorityConfigSchema = v.strictObject({
  max: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_PRIORITY_LEVELS)),
  /** @default "adapter" */
  from: v.optional(v.union([v.literal("adapter"), MessageValueSourceSchema]), "adapter"),
});
export type PriorityConfig = v.InferOutput<typeof PriorityConfigSchema>;

const concurrency = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(MAX_ROUTE_CONCURRENCY));
const prefetch = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_PREFETCH));
const timeoutMs = v.pipe(v.number(), v.minValue(1), v.maxValue(MAX_HANDLER_TIMEOUT_MS));

/**
 * The queue settings a route's inbound and a named queue definition share. Every field is optional;
 * a route's own value wins over its queue definition's, which wins over the defaults.
 */
export const QueueSettingsEntries = {
  /** Handlers in flight; 0 pauses consumption (messages wait in the broker). @default 1 */
  concurrency: v.optional(concurrency),
  /** Deliveries the broker may hand out ahead, 1–10000. @default 10, or `concurrency` when larger */
  prefetch: v.optional(prefetch),
  /** `fifo`: one message at a time, in publish order. @default "none" */
  ordering: v.optional(v.picklist(["none", "fifo"])),
  /**
   * Ordered message groups: messages with the same key are handled one at a time in publish order,
   * including across retries; different keys run concurrently up to `concurrency`.
   */
  group_by: v.optional(MessageValueSourceSchema),
  /** Priority queue. */
  priority: v.optional(PriorityConfigSchema),
  /** Abort one handler run after this many ms (the attempt then counts as incomplete). @default 1800000 */
  timeout_ms: v.optional(timeoutMs),
  /**
   * `true`: a message whose retries are spent goes to the dead-letter queue. `false`: it is dropped
   * (acknowledged, its lineage row `failed`). @default true
   */
  dead_letter: v.optional(v.boolean()),
} as const;

/** The effective queue settings of one route, after merging route, definition and defaults. */
export interface EffectiveQueueSettings {
  readonly concurrency: number;
  readonly prefetch: number;
  readonly ordering: "none" | "fifo";
  readonly group_by?: MessageValueSource;
  readonly priority?: PriorityConfig;
  readonly timeout_ms?: number;
  readonly dead_letter: boolean;
}

/** Reads a dotted `path` from a JSON value; undefined when any step is missing. */
export function readPath(value: unknown, path: string): unknown {
  let current = value;
  for (const part of path.split(".")) {
    if (current === null || typeof current !== "object" || Array.isArray(current)) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

/** The value a source names in a message: its payload path or its header. */
export function readMessageValue(
  source: MessageValueSource,
  body: unknown,
  headers: Readonly<Record<string, string>> | undefined,
): unknown {
  return "field" in source ? readPath(body, source.field) : headers?.[source.header];
}
