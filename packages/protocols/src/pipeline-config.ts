import * as v from "valibot";
import type { EffectiveQueueSettings } from "./queue-definition.js";
import { QueueSettingsEntries } from "./queue-definition.js";
import { applyQueueDefinitions } from "./resolve-queues.js";
import { RETRY_POLICY_LIMITS } from "./retry-policy.js";
import { ConditionSchema } from "./route-condition.js";
import { DEFAULT_HANDLER_TIMEOUT_MS, MAX_HANDLER_TIMEOUT_MS } from "./subscribe-options.js";

const NAME = /^[A-Za-z0-9_.:-]+$/;
const nameSchema = v.pipe(
  v.string(),
  v.regex(NAME, 'use only letters, digits, "_", ".", ":" and "-"'),
  v.maxLength(120),
);

const jsonRecord = v.record(v.string(), v.unknown());

const limited = (field: keyof typeof RETRY_POLICY_LIMITS) =>
  v.pipe(v.number(), v.minValue(RETRY_POLICY_LIMITS[field].min), v.maxValue(RETRY_POLICY_LIMITS[field].max));

/** Retry of FAILED deliveries, in pipeline YAML (snake_case); the ranges are `RETRY_POLICY_LIMITS`. */
export const RetryConfigSchema = v.strictObject({
  /** @default 3 */
  max_attempts: v.optional(v.pipe(limited("maxAttempts"), v.integer()), 3),
  /** @default 1000 */
  initial_delay_ms: v.optional(limited("initialDelayMs"), 1000),
  /** @default 2 */
  multiplier: v.optional(limited("multiplier"), 2),
  /** @default 60000 */
  max_delay_ms: v.optional(limited("maxDelayMs"), 60_000),
});

/**
 * A route's inbound queue, with optional queue settings (see `QueueSettingsEntries`). Settings left
 * out come from the `queues:` definition of the same name, then from the defaults; after parsing,
 * `concurrency` (default 1), `prefetch` (default 10) and `ordering` are always set.
 */
export const InboundConfigSchema = v.strictObject({
  queue: nameSchema,
  ...QueueSettingsEntries,
});

/**
 * A named queue definition (`queues:` in YAML): the settings every route consuming the queue of that
 * name gets unless the route sets them itself, plus a retry policy.
 */
export const QueueDefinitionSchema = v.strictObject({
  ...QueueSettingsEntries,
  retry: v.optional(RetryConfigSchema),
});

/** One adapter in a route's chain. */
export const AdapterConfigSchema = v.strictObject({
  type: nameSchema,
  config: v.optional(jsonRecord, {}),
  /**
   * Evaluated on this step's input before it runs; an explicit `false` skips the step (its input
   * passes to the next step unchanged, its lineage row is `skipped`).
   */
  condition: v.optional(ConditionSchema),
});

/** A route: one inbound queue, an ordered adapter chain, zero or more outbound queues. */
export const RouteConfigSchema = v.strictObject({
  description: v.optional(v.string()),
  inbound: InboundConfigSchema,
  adapters: v.pipe(v.array(AdapterConfigSchema), v.minLength(1, "a route needs at least one adapter")),
  outbound: v.optional(v.array(nameSchema), []),
  /** Retry override for this route (else its queue definition's, else the pipeline's). */
  retry: v.optional(RetryConfigSchema),
  /**
   * Evaluated before the adapters; only an explicit `false` skips the message (acknowledged, its
   * lineage row `skipped`).
   */
  condition: v.optional(ConditionSchema),
});

/** Pipeline-wide settings. */
export const PipelineSettingsSchema = v.strictObject({
  /** Handlers in flight across all routes of one execution. @default 30 */
  max_handlers: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000)), 30),
  /** Fan-out publishes pending per route before the route pauses. @default 500 */
  max_fanout_pending: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1_000_000)), 500),
  /** @default see RetryConfigSchema */
  retry: v.optional(RetryConfigSchema, {}),
  /**
   * Abort an adapter chain running longer than this (at most one day); the message is redelivered.
   * @default 1_800_000
   */
  handler_timeout_ms: v.optional(
    v.pipe(v.number(), v.minValue(1), v.maxValue(MAX_HANDLER_TIMEOUT_MS)),
    DEFAULT_HANDLER_TIMEOUT_MS,
  ),
});

/** The message that starts an execution. */
export const InitConfigSchema = v.strictObject({
  route: nameSchema,
  message: v.optional(v.unknown(), {}),
});

const PipelineConfigObjectSchema = v.strictObject({
  name: nameSchema,
  version: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  description: v.optional(v.string()),
  settings: v.optional(PipelineSettingsSchema, {}),
  init: InitConfigSchema,
  /** Named queue definitions; a route whose inbound queue has the same name uses it. */
  queues: v.optional(v.record(nameSchema, QueueDefinitionSchema), {}),
  routes: v.pipe(
    v.record(nameSchema, RouteConfigSchema),
    v.check((routes) => Object.keys(routes).length > 0, "a pipeline needs at least one route"),
  ),
  /** Modules (paths relative to the config file, or package names) that register user adapters. */
  adapter_modules: v.optional(v.array(v.string()), []),
});

/**
 * A pipeline config as written in YAML. Parsing merges each route's inbound settings with the
 * `queues:` definition of its queue and the defaults, so every route carries its effective settings.
 */
export const PipelineConfigSchema = v.pipe(PipelineConfigObjectSchema, v.transform(applyQueueDefinitions));

export type RetryConfig = v.InferOutput<typeof RetryConfigSchema>;
/** A route's inbound after parsing: queue settings merged with its definition and the defaults. */
export type InboundConfig = v.InferOutput<typeof InboundConfigSchema> & EffectiveQueueSettings;
export type QueueDefinition = v.InferOutput<typeof QueueDefinitionSchema>;
export type AdapterConfig = v.InferOutput<typeof AdapterConfigSchema>;
export type RouteConfig = Omit<v.InferOutput<typeof RouteConfigSchema>, "inbound"> & {
  readonly inbound: InboundConfig;
};
export type PipelineSettings = v.InferOutput<typeof PipelineSettingsSchema>;
export type InitConfig = v.InferOutput<typeof InitConfigSchema>;
/** A parsed, defaulted pipeline config. */
export type PipelineConfig = Omit<v.InferOutput<typeof PipelineConfigObjectSchema>, "routes"> & {
  readonly routes: Record<string, RouteConfig>;
};
/** The config as the object schema outputs it, before queue definitions are merged. */
export type ParsedPipelineConfig = v.InferOutput<typeof PipelineConfigObjectSchema>;
/** A pipeline config before defaults are applied. */
export type PipelineConfigInput = v.InferInput<typeof PipelineConfigSchema>;
