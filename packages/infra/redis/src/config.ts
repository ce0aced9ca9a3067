import { redactSecrets, redactUrl } from "@factflow/protocols";
import { brokerUrl, parseProviderConfig, positiveInt } from "@factflow/provider-kit";
import * as v from "valibot";

export { redactSecrets, redactUrl };

/** Settings of the Redis Streams provider. */
export const RedisConfigSchema = v.strictObject({
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. @default "redis://127.0.0.1:6379" */
  url: v.optional(
    brokerUrl(["redis:", "rediss:"], 'must be a "redis://" or "rediss://" URL, e.g. redis://127.0.0.1:6379'),
    "redis://127.0.0.1:6379",
  ),
  /**
   * Prefix of every key the provider writes, so several Factflow deployments (or test runs) share one
   * Redis database without seeing each other. Letters, digits and `_ . : -` only. @default "factflow:"
   */
  keyPrefix: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[A-Za-z0-9_.:-]{0,100}$/, "must be at most 100 letters, digits, '_', '.', ':' or '-'"),
    ),
    "factflow:",
  ),
  /**
   * How long a delivered entry may stay unsettled without its consumer showing signs of life before
   * another consumer reclaims it (`XAUTOCLAIM`), in ms. Live consumers refresh their entries every
   * third of this, so a long-running handler is never stolen; only a dead process's entries move.
   * @default 30000
   */
  visibilityTimeoutMs: v.optional(
    v.pipe(v.number(), v.integer(), v.minValue(300), v.maxValue(3_600_000)),
    30_000,
  ),
  /**
   * How often each subscription looks for entries idle past the visibility timeout, in ms. A dead
   * consumer's entries move after the visibility timeout plus up to this. @default half the
   * visibility timeout
   */
  reclaimIntervalMs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(3_600_000))),
  /** How long one blocking `XREADGROUP` waits for new entries before it is issued again, in ms. @default 2000 */
  blockMs: v.optional(positiveInt(60_000), 2_000),
  /**
   * Longest any command (a publish, a settlement, an admin call) waits for Redis before it rejects
   * with a `timeout` error, in ms. @default 10000
   */
  commandTimeoutMs: v.optional(positiveInt(600_000), 10_000),
  /** Time allowed for the TCP connect of one connection attempt, in ms. @default 10000 */
  connectTimeoutMs: v.optional(positiveInt(300_000), 10_000),
  /**
   * Longest pause between two checks for due delayed messages (retries, `delayMs` publishes) made
   * by other processes; this process's own are promoted on time. @default 500
   */
  delayPollMs: v.optional(positiveInt(60_000), 500),
  /** Largest accepted message (JSON body + headers), in bytes. @default 16777216 */
  maxMessageBytes: v.optional(positiveInt(134_217_728), 16_777_216),
  /** Client name shown by `CLIENT LIST`. @default "factflow" */
  connectionName: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_.:-]{1,100}$/)), "factflow"),
});

/** What {@link createRedisProvider} accepts. */
export type RedisConfigInput = v.InferInput<typeof RedisConfigSchema>;
/** The parsed, defaulted, frozen provider config. */
export type RedisConfig = Readonly<v.InferOutput<typeof RedisConfigSchema>>;

/**
 * Validates and freezes a provider config. Throws a `ConfigError` listing every issue; the URL's
 * password never appears in it.
 */
export function parseRedisConfig(input: unknown): RedisConfig {
  return Object.freeze(parseProviderConfig("redis", RedisConfigSchema, input));
}
