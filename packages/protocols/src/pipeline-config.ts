import * as v from "valibot";
import { RETRY_POLICY_LIMITS } from "./retry-policy.js";
import {
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_PREFETCH,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
} from "./subscribe-options.js";

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

/** A route's inbound queue. */
export const InboundConfigSchema = v.strictObject({
  queue: nameSchema,
  /** Handlers in flight for this route. @default 1 */
  concurrency: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(1000)), 1),
  /** Deliveries the broker may hand out ahead, 1 to `MAX_PREFETCH` (10000). @default 10 */
  prefetch: v.optional(
    v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_PREFETCH)),
    DEFAULT_PREFETCH,
  ),
});

/** One adapter in a route's chain. */
export const AdapterConfigSchema = v.strictObject({
  type: nameSchema,
  config: v.optional(jsonRecord, {}),
});

/** A route: one inbound queue, an ordered adapter chain, zero or more outbound queues. */
export const RouteConfigSchema = v.strictObject({
  description: v.optional(v.string()),
  inbound: InboundConfigSchema,
  adapters: v.pipe(v.array(AdapterConfigSchema), v.minLength(1, "a route needs at least one adapter")),
  outbound: v.optional(v.array(nameSchema), []),
  /** Retry override for this route. */
  retry: v.optional(RetryConfigSchema),
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

/** A pipeline config as written in YAML. */
export const PipelineConfigSchema = v.strictObject({
  name: nameSchema,
  version: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1))),
  description: v.optional(v.string()),
  settings: v.optional(PipelineSettingsSchema, {}),
  init: InitConfigSchema,
  routes: v.pipe(
    v.record(nameSchema, RouteConfigSchema),
    v.check((routes) => Object.keys(routes).length > 0, "a pipeline needs at least one route"),
  ),
  /** Modules (paths relative to the config file, or package names) that register user adapters. */
  adapter_modules: v.optional(v.array(v.string()), []),
});

export type RetryConfig = v.InferOutput<typeof RetryConfigSchema>;
export type InboundConfig = v.InferOutput<typeof InboundConfigSchema>;
export type AdapterConfig = v.InferOutput<typeof AdapterConfigSchema>;
export type RouteConfig = v.InferOutput<typeof RouteConfigSchema>;
export type PipelineSettings = v.InferOutput<typeof PipelineSettingsSchema>;
export type InitConfig = v.InferOutput<typeof InitConfigSchema>;
/** A parsed, defaulted pipeline config. */
export type PipelineConfig = v.InferOutput<typeof PipelineConfigSchema>;
/** A pipeline config before defaults are applied. */
export type PipelineConfigInput = v.InferInput<typeof PipelineConfigSchema>;
