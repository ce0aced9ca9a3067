import { redactSecrets, redactUrl } from "@factflow/protocols";
import { brokerUrl, parseProviderConfig, positiveInt } from "@factflow/provider-kit";
import * as v from "valibot";

export { redactSecrets, redactUrl };

/** Settings of the RabbitMQ provider. */
export const RabbitMqConfigSchema = v.strictObject({
  /** `amqp://user:password@host:port/vhost` (or `amqps://`). @default "amqp://127.0.0.1:5672" */
  url: v.optional(
    brokerUrl(
      ["amqp:", "amqps:"],
      'must be an "amqp://" or "amqps://" URL, e.g. amqp://guest:guest@127.0.0.1:5672',
    ),
    "amqp://127.0.0.1:5672",
  ),
  /** AMQP heartbeat interval; a silent connection is declared dead after two missed beats. @default 5 */
  heartbeatSeconds: v.optional(positiveInt(600), 5),
  /** Time allowed for the TCP + AMQP handshake of one connection attempt, in ms. @default 10000 */
  connectTimeoutMs: v.optional(positiveInt(300_000), 10_000),
  /**
   * Longest a `publish` may wait for the broker (a connection, an unblock, a publisher confirm)
   * before it rejects with a `timeout` error, in ms. @default 10000
   */
  publishTimeoutMs: v.optional(positiveInt(600_000), 10_000),
  /** First reconnect delay after a connection loss, in ms. @default 100 */
  reconnectInitialDelayMs: v.optional(positiveInt(60_000), 100),
  /** Upper bound of the reconnect delay, in ms. @default 5000 */
  reconnectMaxDelayMs: v.optional(positiveInt(300_000), 5_000),
  /**
   * Idle lifetime added to a retry holding queue's delay for its `x-expires`, in ms. A holding
   * queue nobody re-declares vanishes this long after its delay has passed. @default 600000
   */
  retryQueueIdleMs: v.optional(
    v.pipe(v.number(), v.integer(), v.minValue(60_000), v.maxValue(86_400_000)),
    600_000,
  ),
  /** Largest accepted message (JSON body + headers), in bytes. @default 16777216 */
  maxMessageBytes: v.optional(positiveInt(134_217_728), 16_777_216),
  /** Connection name shown in the RabbitMQ management UI. @default "factflow" */
  connectionName: v.optional(v.pipe(v.string(), v.maxLength(200)), "factflow"),
});

/** What {@link createRabbitMqProvider} accepts. */
export type RabbitMqConfigInput = v.InferInput<typeof RabbitMqConfigSchema>;
/** The parsed, defaulted, frozen provider config. */
export type RabbitMqConfig = Readonly<v.InferOutput<typeof RabbitMqConfigSchema>>;

/**
 * Validates and freezes a provider config. Throws a `ConfigError` listing every issue; the URL's
 * password never appears in it.
 */
export function parseRabbitMqConfig(input: unknown): RabbitMqConfig {
  return Object.freeze(parseProviderConfig("rabbitmq", RabbitMqConfigSchema, input));
}
