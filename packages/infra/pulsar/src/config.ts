import { brokerUrl, parseProviderConfig, positiveInt } from "@factflow/provider-kit";
import * as v from "valibot";

/** Pulsar tenant and namespace names: letters, digits, `_`, `-`, `=`, `:`, `.`. */
const pulsarName = (what: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[A-Za-z0-9_=:.-]{1,100}$/, `${what} must be 1-100 characters of [A-Za-z0-9_=:.-]`),
  );

/** Settings of the Pulsar provider. */
export const PulsarConfigSchema = v.strictObject({
  /**
   * The broker's WebSocket API base: `ws://host:port` (or `wss://`), the broker's web service port.
   * @default "ws://127.0.0.1:8080"
   */
  url: v.optional(
    brokerUrl(
      ["ws:", "wss:"],
      'must be a "ws://" or "wss://" URL of the broker web service, e.g. ws://127.0.0.1:8080',
    ),
    "ws://127.0.0.1:8080",
  ),
  /**
   * The admin REST API base, `http://host:port`. Leave it out to use `url` with http(s) instead
   * of ws(s) (a standalone broker serves both on one port).
   */
  adminUrl: v.optional(
    brokerUrl(
      ["http:", "https:"],
      'must be an "http://" or "https://" URL of the admin REST API, e.g. http://127.0.0.1:8080',
    ),
  ),
  /** Tenant of every Factflow topic. @default "public" */
  tenant: v.optional(pulsarName("tenant"), "public"),
  /** Namespace (within the tenant) of every Factflow topic. @default "default" */
  namespace: v.optional(pulsarName("namespace"), "default"),
  /** Time allowed to open one WebSocket (producer or consumer), in ms. @default 10000 */
  connectTimeoutMs: v.optional(positiveInt(300_000), 10_000),
  /**
   * Longest a `publish` (and an admin REST call) may wait for the broker before it rejects with a
   * `timeout` error, in ms. @default 10000
   */
  publishTimeoutMs: v.optional(positiveInt(600_000), 10_000),
  /** Interval of WebSocket pings; a socket without a pong for two intervals is dropped. @default 5000 */
  pingIntervalMs: v.optional(positiveInt(600_000), 5_000),
  /** First reconnect delay of a consumer after its socket closed, in ms. @default 100 */
  reconnectInitialDelayMs: v.optional(positiveInt(60_000), 100),
  /** Upper bound of the reconnect delay, in ms. @default 5000 */
  reconnectMaxDelayMs: v.optional(positiveInt(300_000), 5_000),
  /**
   * Pulsar's `negativeAckRedeliveryDelay` of every consumer, in ms: the fixed delay after which the
   * broker hands back a delivery the provider could not settle (its retry copy could not be
   * published). @default 1000
   */
  negativeAckRedeliveryDelayMs: v.optional(positiveInt(3_600_000), 1_000),
  /** Largest accepted message (JSON body + headers), in bytes. Pulsar's default frame allows 5 MB. @default 4194304 */
  maxMessageBytes: v.optional(positiveInt(100_000_000), 4_194_304),
});

/** What {@link createPulsarProvider} accepts. */
export type PulsarConfigInput = v.InferInput<typeof PulsarConfigSchema>;
/** The parsed, defaulted, frozen provider config (with `adminUrl` always set). */
export type PulsarConfig = Readonly<v.InferOutput<typeof PulsarConfigSchema> & { adminUrl: string }>;

/** `ws://h:p/x` → `http://h:p/x`, `wss://` → `https://`, without a trailing slash. */
export function adminUrlOf(url: string): string {
  return url.replace(/^ws(s?):/, "http$1:").replace(/\/+$/, "");
}

/** Validates and freezes a provider config. Throws a `ConfigError` listing every issue. */
export function parsePulsarConfig(input: unknown): PulsarConfig {
  const output = parseProviderConfig("pulsar", PulsarConfigSchema, input);
  return Object.freeze({
    ...output,
    url: output.url.replace(/\/+$/, ""),
    adminUrl: (output.adminUrl ?? adminUrlOf(output.url)).replace(/\/+$/, ""),
  });
}
