import { createRequire } from "node:module";
import type { Logger } from "@factflow/protocols";
import { type DestinationStream, type Logger as PinoLogger, pino } from "pino";

export type LogLevel = "debug" | "info" | "warn" | "error";

/** Field names whose values are secrets wherever they appear (two levels deep). */
const SECRET_KEYS = [
  "token",
  "api_token",
  "apiToken",
  "password",
  "passcode",
  "secret",
  "authorization",
  "artemis_password",
  "pulsar_token",
];
/** Field names holding URLs that may carry a password: only the password is removed. */
const URL_KEYS = [
  "url",
  "database_url",
  "databaseUrl",
  "rabbitmq_url",
  "artemis_url",
  "redis_url",
  "pulsar_url",
];

const atAnyDepth = (keys: readonly string[]) => keys.flatMap((k) => [k, `*.${k}`, `*.*.${k}`]);

/** `scheme://user:password@` anywhere in a string. */
const URL_PASSWORD = /([a-z][a-z0-9+.-]*:\/\/[^:/@\s]*:)[^@\s/]*@/gi;

function scrub(text: string): string {
  return text.includes("://") ? text.replace(URL_PASSWORD, "$1<redacted>@") : text;
}

/** Removes URL passwords from every string of a log object, however it was named. */
function scrubDeep(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return scrub(value);
  if (depth > 4 || value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = scrubDeep(v, depth + 1);
  return out;
}

export interface CreateLoggerOptions {
  /** @default "info" */
  readonly level?: LogLevel;
  /** Fields on every line. */
  readonly base?: Record<string, unknown>;
  /**
   * Human-readable lines through pino-pretty instead of JSON.
   * @default true when stderr is a terminal
   */
  readonly pretty?: boolean;
  /** Where lines go. @default stderr */
  readonly destination?: DestinationStream;
}

/** pino-pretty when asked for (and loadable, e.g. not pruned from a bundle); otherwise undefined: JSON. */
function prettyStream(wanted: boolean | undefined): DestinationStream | undefined {
  if (wanted === false || (wanted === undefined && process.stderr.isTTY !== true)) return undefined;
  try {
    const require = createRequire(import.meta.url);
    const pretty = require("pino-pretty") as (options: Record<string, unknown>) => DestinationStream;
    return pretty({ destination: 2, sync: true, messageKey: "message", translateTime: "SYS:HH:MM:ss.l" });
  } catch {
    return undefined;
  }
}

/**
 * The server's pino instance: JSON lines on stderr (`time`, `level`, `message`, fields), pretty on a
 * terminal. Secrets are removed before a line is written: values of secret fields become
 * `<redacted>`, and URL passwords anywhere (fields or message) become `<redacted>`.
 */
export function createPinoLogger(options: CreateLoggerOptions = {}): PinoLogger {
  const destination = options.destination ?? prettyStream(options.pretty) ?? pino.destination({ fd: 2 });
  return pino(
    {
      level: options.level ?? "info",
      base: options.base ?? null,
      messageKey: "message",
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        level: (label) => ({ level: label }),
        log: (object) => scrubDeep(object) as Record<string, unknown>,
      },
      redact: {
        paths: [...atAnyDepth(SECRET_KEYS), ...atAnyDepth(URL_KEYS)],
        censor: (value, path) =>
          URL_KEYS.includes(path[path.length - 1] ?? "") && typeof value === "string"
            ? scrub(value)
            : "<redacted>",
      },
      hooks: {
        logMethod(args, method) {
          const scrubbed = args.map((a) => (typeof a === "string" ? scrub(a) : a)) as Parameters<
            typeof method
          >;
          method.apply(this, scrubbed);
        },
      },
    },
    destination,
  );
}

/**
 * Adapts any pino logger to the small `Logger` interface the engine, lineage and providers take
 * (`@factflow/protocols`), so they log through it without depending on pino.
 */
export function fromPino(logger: PinoLogger): Logger {
  const at =
    (level: LogLevel) =>
    (message: string, fields?: Record<string, unknown>): void => {
      if (fields === undefined) logger[level](message);
      else logger[level](fields, message);
    };
  return {
    debug: at("debug"),
    info: at("info"),
    warn: at("warn"),
    error: at("error"),
    child: (fields) => fromPino(logger.child(fields)),
  };
}

/** The server's default logger: `createPinoLogger` seen through the engine's `Logger` interface. */
export function createLogger(options: CreateLoggerOptions = {}): Logger {
  return fromPino(createPinoLogger(options));
}

/** JSON lines on stderr at `level` (kept for callers of 0.1; same as `createLogger({ pretty: false })`). */
export function createJsonLogger(level: LogLevel = "info", base: Record<string, unknown> = {}): Logger {
  return createLogger({ level, base, pretty: false });
}
