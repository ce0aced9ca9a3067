import type { RetryPolicy, SubscribeOptions } from "@factflow/protocols";
import * as v from "valibot";
import { invalidInput } from "./errors.js";

/** How a physical queue orders its messages. */
export interface QueueLayout {
  readonly ordering: "none" | "fifo";
  /** Top-level body field naming the FIFO group (only with `ordering: "fifo"`). */
  readonly groupBy: string | undefined;
  /** Set when the queue is a priority queue. */
  readonly maxPriority: number | undefined;
}

export const DEFAULT_LAYOUT: QueueLayout = Object.freeze({
  ordering: "none",
  groupBy: undefined,
  maxPriority: undefined,
});

const posInt = (min: number, max: number) =>
  v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max));

const RetrySchema = v.strictObject({
  maxAttempts: v.optional(posInt(1, 1_000)),
  initialDelayMs: v.optional(posInt(0, 86_400_000)),
  multiplier: v.optional(v.pipe(v.number(), v.minValue(1), v.maxValue(100))),
  maxDelayMs: v.optional(posInt(0, 86_400_000)),
});

/**
 * Options of `defineQueue`: the queue's layout, plus defaults for subscriptions that do not set their
 * own (the durable worker's named queue configs: type, group field, concurrency, retries, timeout).
 */
export const QueueDefinitionSchema = v.strictObject({
  /** @default "none" */
  ordering: v.optional(v.picklist(["none", "fifo"])),
  groupBy: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
  /** 1–10 levels; any value makes the queue honour priorities 0–9. */
  maxPriority: v.optional(posInt(1, 10)),
  prefetch: v.optional(posInt(1, 100_000)),
  concurrency: v.optional(posInt(0, 100_000)),
  handlerTimeoutMs: v.optional(posInt(1, 86_400_000)),
  retry: v.optional(RetrySchema),
});

/** What `defineQueue` accepts. */
export type QueueDefinition = v.InferOutput<typeof QueueDefinitionSchema>;

const SubscribeSchema = v.object({
  subscription: v.pipe(v.string(), v.minLength(1), v.maxLength(200)),
  prefetch: v.optional(posInt(1, 100_000)),
  concurrency: v.optional(posInt(0, 100_000)),
  retry: v.optional(RetrySchema),
  ordering: v.optional(v.picklist(["none", "fifo"])),
  groupBy: v.optional(v.pipe(v.string(), v.minLength(1), v.maxLength(200))),
  maxPriority: v.optional(posInt(1, 10)),
  handlerTimeoutMs: v.optional(posInt(1, 86_400_000)),
});

function describe(issues: readonly v.BaseIssue<unknown>[]): string {
  return issues
    .map((issue) => `${issue.path?.map((p) => String(p.key)).join(".") ?? "(root)"}: ${issue.message}`)
    .join("; ");
}

export function parseDefinition(input: unknown): QueueDefinition {
  const result = v.safeParse(QueueDefinitionSchema, input ?? {});
  if (!result.success)
    throw invalidInput("invalid_argument", `queue definition is invalid: ${describe(result.issues)}`);
  return result.output;
}

export function parseSubscribeOptions(input: SubscribeOptions): SubscribeOptions {
  const result = v.safeParse(SubscribeSchema, input);
  if (!result.success)
    throw invalidInput("invalid_argument", `subscribe options are invalid: ${describe(result.issues)}`);
  return input;
}

/** The layout after applying the layout fields a caller set explicitly. */
export function mergeLayout(
  current: QueueLayout,
  explicit: {
    ordering?: "none" | "fifo" | undefined;
    groupBy?: string | undefined;
    maxPriority?: number | undefined;
  },
): QueueLayout {
  return {
    ordering: explicit.ordering ?? current.ordering,
    groupBy: explicit.groupBy ?? (explicit.ordering === "none" ? undefined : current.groupBy),
    maxPriority: explicit.maxPriority ?? current.maxPriority,
  };
}

export function sameLayout(a: QueueLayout, b: QueueLayout): boolean {
  return a.ordering === b.ordering && a.groupBy === b.groupBy && a.maxPriority === b.maxPriority;
}

export type PartialRetry = Partial<RetryPolicy>;
