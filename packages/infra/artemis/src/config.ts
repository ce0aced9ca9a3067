import { redactUrl } from "@factflow/protocols";
import { brokerUrl, parseProviderConfig, positiveInt } from "@factflow/provider-kit";
import * as v from "valibot";

export { redactUrl };

/** What `scripts/services/artemis.sh start` prints, and the default of every Artemis setting. */
export const DEFAULT_ARTEMIS_URL = "stomp://127.0.0.1:61613";

/** Settings of the Artemis provider. */
export const ArtemisConfigSchema = v.strictObject({
  /**
   * Broker STOMP acceptor, `stomp://host:port` (credentials may ride in it: `stomp://user:pass@host:port`).
   * @default "stomp://127.0.0.1:61613"
   */
  url: v.optional(
    brokerUrl(["stomp:"], 'must be a "stomp://host:port" URL, e.g. stomp://127.0.0.1:61613', {
      needsHost: true,
    }),
    DEFAULT_ARTEMIS_URL,
  ),
  /** STOMP `login`; overrides a user in the URL. Anonymous when neither is set. */
  login: v.optional(v.string()),
  /** STOMP `passcode`; overrides a password in the URL. Printed as `<redacted>`. */
  passcode: v.optional(v.string()),
  /** STOMP heart-beat in both directions, in ms (0 turns them off). @default 5000 */
  heartbeatMs: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(600_000)), 5_000),
  /** Time allowed for one TCP + STOMP CONNECT handshake, in ms. @default 10000 */
  connectTimeoutMs: v.optional(positiveInt(300_000), 10_000),
  /** Longest a SEND waits for its RECEIPT before `publish` rejects with a `timeout` error, in ms. @default 10000 */
  receiptTimeoutMs: v.optional(positiveInt(600_000), 10_000),
  /** First reconnect delay after a connection loss, in ms; doubles up to `maxReconnectDelayMs`. @default 200 */
  reconnectDelayMs: v.optional(positiveInt(60_000), 200),
  /** Upper bound of the reconnect delay, in ms. @default 5000 */
  maxReconnectDelayMs: v.optional(positiveInt(300_000), 5_000),
  /** Longest an admin (management) request may take, in ms. @default 10000 */
  adminTimeoutMs: v.optional(positiveInt(600_000), 10_000),
  /**
   * Artemis flow control counts bytes, not messages: a subscription's `consumer-window-size` is
   * `prefetch × prefetchBytesPerMessage` (prefetch 1 uses a window of 1 byte: exactly one unsettled
   * delivery). Messages beyond what handlers can take wait in the provider and count as waiting in
   * `admin.stats`. @default 2048
   */
  prefetchBytesPerMessage: v.optional(positiveInt(16_777_216), 2048),
  /** Largest accepted message (JSON body + headers), in bytes. @default 10485760 */
  maxMessageBytes: v.optional(positiveInt(104_857_600), 10_485_760),
});

/** What {@link createArtemisProvider} accepts. */
export type ArtemisConfigInput = v.InferInput<typeof ArtemisConfigSchema>;
/** The parsed, defaulted, frozen provider config. */
export type ArtemisConfig = Readonly<v.InferOutput<typeof ArtemisConfigSchema>>;

/** Where and as whom to connect, resolved from the URL and the explicit fields. */
export interface ArtemisEndpoint {
  readonly host: string;
  readonly port: number;
  readonly login?: string;
  readonly passcode?: string;
}

/** Host, port and credentials of a parsed config. */
export function endpointOf(config: ArtemisConfig): ArtemisEndpoint {
  const url = new URL(config.url);
  const login = config.login ?? (url.username === "" ? undefined : decodeURIComponent(url.username));
  const passcode = config.passcode ?? (url.password === "" ? undefined : decodeURIComponent(url.password));
  return {
    host: url.hostname,
    port: url.port === "" ? 61613 : Number(url.port),
    ...(login === undefined ? {} : { login }),
    ...(passcode === undefined ? {} : { passcode }),
  };
}

/** A config safe to print or log: the passcode and any URL password become `<redacted>`. */
export function redactConfig(config: ArtemisConfig): Record<string, unknown> {
  return {
    ...config,
    url: redactUrl(config.url),
    ...(config.passcode === undefined ? {} : { passcode: "<redacted>" }),
  };
}

function secretsOf(input: unknown): string[] {
  if (typeof input !== "object" || input === null) return [];
  const secrets: string[] = [];
  const { url, passcode } = input as { url?: unknown; passcode?: unknown };
  if (typeof passcode === "string" && passcode.length > 0) secrets.push(passcode);
  if (typeof url === "string") {
    const match = /\/\/[^:/@]*:([^@/]*)@/.exec(url);
    if (match?.[1] !== undefined && match[1].length > 0) secrets.push(match[1]);
  }
  return secrets;
}

/**
 * Validates and freezes a provider config. Throws a `ConfigError` listing every issue; secrets never
 * appear in it.
 */
export function parseArtemisConfig(input: unknown): ArtemisConfig {
  return Object.freeze(parseProviderConfig("artemis", ArtemisConfigSchema, input, secretsOf(input)));
}
