import { readFileSync } from "node:fs";
import { extname, resolve } from "node:path";
import { ConfigError, type ConfigIssue, redactUrl } from "@factflow/protocols";
import * as v from "valibot";
import { parse as parseYaml } from "yaml";

export { redactUrl };

const PROVIDERS = ["embedded", "rabbitmq", "artemis", "pulsar", "redis"] as const;

const intFrom = (min: number, max: number) =>
  v.pipe(
    v.union([v.number(), v.pipe(v.string(), v.trim(), v.regex(/^-?\d+$/, "must be a whole number"))]),
    v.transform((value) => Number(value)),
    v.integer("must be a whole number"),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

const nonEmpty = v.pipe(v.string(), v.trim(), v.minLength(1, "must not be empty"));

/** A list: an array (settings file) or comma-separated text (env), blanks dropped. */
const listOf = (item: v.GenericSchema<string, string>) =>
  v.pipe(
    v.union([v.array(v.string()), v.string()], "must be a list (comma-separated in env)"),
    v.transform((value) =>
      (typeof value === "string" ? value.split(",") : value).map((x) => x.trim()).filter((x) => x !== ""),
    ),
    v.array(item),
  );

const flag = v.pipe(
  v.union([
    v.boolean(),
    v.picklist(["1", "0", "true", "false", "yes", "no"], "must be 1/0, true/false or yes/no"),
  ]),
  v.transform((value) => value === true || value === "1" || value === "true" || value === "yes"),
);

const HOST_NAME = /^(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?$|^\[[0-9a-f:.]+\]$/i;
const ORIGIN = /^https?:\/\/[^/\s]+$/i;

/**
 * Server and CLI settings, read from `FACTFLOW_*` environment variables and an optional YAML/JSON
 * settings file (keys are the variable names without the prefix, in lower case: `rabbitmq_url`).
 * Environment variables win over the file.
 */
export const SettingsSchema = v.pipe(
  v.strictObject({
    /** Queue provider. @default "embedded" */
    provider: v.optional(v.picklist(PROVIDERS, `must be one of ${PROVIDERS.join(", ")}`), "embedded"),
    /** Embedded provider storage: `file` (survives restarts, under the data dir) or `memory`. @default "file" */
    embedded_mode: v.optional(v.picklist(["file", "memory"], "must be file or memory"), "file"),
    /** AMQP URL, required when provider is rabbitmq. */
    rabbitmq_url: v.optional(
      v.pipe(nonEmpty, v.regex(/^amqps?:\/\//, "must start with amqp:// or amqps://")),
    ),
    /** Artemis STOMP acceptor, e.g. `stomp://127.0.0.1:61613`; required when provider is artemis. */
    artemis_url: v.optional(
      v.pipe(nonEmpty, v.regex(/^stomp:\/\//, "must start with stomp:// (e.g. stomp://127.0.0.1:61613)")),
    ),
    artemis_user: v.optional(nonEmpty),
    /** Redis URL when provider is redis. @default "redis://127.0.0.1:6379" */
    redis_url: v.optional(
      v.pipe(
        nonEmpty,
        v.regex(/^rediss?:\/\//, "must start with redis:// or rediss:// (e.g. redis://127.0.0.1:6379)"),
      ),
    ),
    /**
     * Prefix of every Redis key the provider writes, so several deployments share one Redis
     * database. Letters, digits and `_ . : -`. @default "factflow:"
     */
    redis_key_prefix: v.optional(
      v.pipe(
        v.string(),
        v.trim(),
        v.regex(/^[A-Za-z0-9_.:-]{1,100}$/, "must be at most 100 letters, digits, '_', '.', ':' or '-'"),
      ),
    ),
    artemis_password: v.optional(v.string()),
    /** Pulsar WebSocket API (the broker web service) when provider is pulsar. @default "ws://127.0.0.1:8080" */
    pulsar_url: v.optional(
      v.pipe(nonEmpty, v.regex(/^wss?:\/\//, "must start with ws:// or wss:// (e.g. ws://127.0.0.1:8080)")),
    ),
    /** Pulsar admin REST API. @default pulsar_url with http(s):// */
    pulsar_admin_url: v.optional(
      v.pipe(
        nonEmpty,
        v.regex(/^https?:\/\//, "must start with http:// or https:// (e.g. http://127.0.0.1:8080)"),
      ),
    ),
    /** Pulsar tenant of Factflow's topics. @default "public" */
    pulsar_tenant: v.optional(nonEmpty),
    /** Pulsar namespace (within the tenant) of Factflow's topics. @default "default" */
    pulsar_namespace: v.optional(nonEmpty),
    /** PostgreSQL URL for lineage and executions; PGlite under the data dir when absent. */
    database_url: v.optional(v.pipe(nonEmpty, v.regex(/^postgres(ql)?:\/\//, "must start with postgres://"))),
    /**
     * Where lineage, configs and executions live: `database` (PostgreSQL with `database_url`, else
     * PGlite under the data dir) or `memory` (this process only, nothing persisted; for ephemeral
     * runs and tests). @default "database"
     */
    lineage: v.optional(v.picklist(["database", "memory"], "must be database or memory"), "database"),
    /** Where embedded queues, the PGlite database and (by default) artefacts live. @default ".factflow" */
    data_dir: v.optional(nonEmpty, ".factflow"),
    /** Artefact storage root. @default "<data_dir>/artefacts" */
    storage_root: v.optional(nonEmpty),
    /** Directory of pipeline YAML files the server serves as configs. @default "configs" */
    config_dir: v.optional(nonEmpty, "configs"),
    /** Executions running at once before new ones get 429. @default 10 */
    max_concurrent: v.optional(intFrom(1, 10_000), 10),
    /** @default "127.0.0.1" */
    host: v.optional(nonEmpty, "127.0.0.1"),
    /** @default 8000 (0 picks a free port) */
    port: v.optional(intFrom(0, 65_535), 8000),
    /**
     * Bearer token required on every mutating route when set. Required when `host` is not a loopback
     * address (unless `insecure`).
     */
    api_token: v.optional(v.pipe(v.string(), v.minLength(16, "must be at least 16 characters"))),
    /** Require the token on reads too (dead-letter bodies and inputs can hold user data). @default false */
    api_token_reads: v.optional(flag, false),
    /** Serve beyond loopback without a token (logs a warning at start). @default false */
    insecure: v.optional(flag, false),
    /**
     * Host names (besides loopback names and IP literals) this server answers to; `*.example.com`
     * allows subdomains. Other `Host` headers get 421, which closes DNS rebinding. @default []
     */
    allowed_hosts: v.optional(
      listOf(
        v.pipe(v.string(), v.regex(HOST_NAME, "must be host names like api.example.com or *.example.com")),
      ),
      [],
    ),
    /** Origins (`https://console.example.com`) allowed to send mutating requests besides the server's own. @default [] */
    allowed_origins: v.optional(
      listOf(v.pipe(v.string(), v.regex(ORIGIN, "must be origins like https://app.example.com"))),
      [],
    ),
    /**
     * Directories from which pipeline configs may import `adapter_modules` (files; symlinks are
     * resolved first). @default [config_dir]
     */
    adapter_dirs: v.optional(listOf(nonEmpty)),
    /** Package names that pipeline configs may import as `adapter_modules`. @default [] */
    adapter_packages: v.optional(listOf(nonEmpty), []),
    /**
     * Largest pipeline config, in bytes. Parsing is one synchronous step of about 60 µs per KiB,
     * so this bounds how long a validation can hold up other requests. @default 262144
     */
    config_max_bytes: v.optional(intFrom(1024, 16 * 1024 * 1024), 256 * 1024),
    /** Most routes one pipeline config may declare. @default 1000 */
    config_max_routes: v.optional(intFrom(1, 100_000), 1000),
    /** Largest accepted request body, in bytes. @default 1048576 */
    body_limit_bytes: v.optional(intFrom(1024, 100 * 1024 * 1024), 1024 * 1024),
    /**
     * Finished executions older than this many days are deleted with their lineage by an hourly
     * job. @default 0 (keep forever)
     */
    retention_days: v.optional(intFrom(0, 36_500), 0),
    /**
     * Seconds a running execution may go without progress before it is reported as stalled, with
     * what it waits for (logged once per stall, `stall` in `GET /executions/{id}`; `factflow run`
     * prints it). 0 turns the report off. @default 30
     */
    stall_after_s: v.optional(intFrom(0, 86_400), 30),
  }),
  v.forward(
    v.check(
      (s) => s.provider !== "rabbitmq" || s.rabbitmq_url !== undefined,
      "is required when provider is rabbitmq (e.g. amqp://guest:guest@127.0.0.1:5672)",
    ),
    ["rabbitmq_url"],
  ),
  v.forward(
    v.check(
      (s) => s.provider !== "artemis" || s.artemis_url !== undefined,
      "is required when provider is artemis (e.g. stomp://127.0.0.1:61613)",
    ),
    ["artemis_url"],
  ),
);

type ParsedSettings = v.InferOutput<typeof SettingsSchema>;

/** Validated, frozen settings with paths resolved against the working directory. */
export type Settings = Readonly<
  Omit<ParsedSettings, "storage_root" | "provider" | "adapter_dirs"> & {
    provider: ParsedSettings["provider"];
    storage_root: string;
    adapter_dirs: readonly string[];
  }
>;

/** The raw input shape (what a settings file or `loadSettings` overrides may hold). */
export type SettingsInput = v.InferInput<typeof SettingsSchema>;

const KEYS = [
  "provider",
  "embedded_mode",
  "rabbitmq_url",
  "artemis_url",
  "artemis_user",
  "artemis_password",
  "redis_url",
  "redis_key_prefix",
  "pulsar_url",
  "pulsar_admin_url",
  "pulsar_tenant",
  "pulsar_namespace",
  "database_url",
  "lineage",
  "data_dir",
  "storage_root",
  "config_dir",
  "max_concurrent",
  "host",
  "port",
  "api_token",
  "body_limit_bytes",
  "retention_days",
  "api_token_reads",
  "insecure",
  "allowed_hosts",
  "allowed_origins",
  "adapter_dirs",
  "adapter_packages",
  "config_max_routes",
  "config_max_bytes",
  "stall_after_s",
] as const;

/** The environment variable of each setting: `FACTFLOW_` and the key in upper case. */
export const SETTING_VARIABLES: readonly string[] = KEYS.map((key) => `FACTFLOW_${key.toUpperCase()}`);

/**
 * Variables read from the environment only, never from the settings file: where the file is, and
 * the cluster settings (docs/deployment.md), which must match on every server of a cluster.
 */
export const ENVIRONMENT_ONLY_VARIABLES: readonly string[] = [
  "FACTFLOW_SETTINGS_FILE",
  "FACTFLOW_CLUSTER",
  "FACTFLOW_NODE_ID",
  "FACTFLOW_CLUSTER_LEASE_MS",
  "FACTFLOW_CLUSTER_DISCOVERY_MS",
  "FACTFLOW_CLUSTER_MAX_RUNNING",
];

const SECRET_KEYS = new Set<string>(["api_token", "artemis_password"]);
const URL_KEYS = new Set<string>([
  "rabbitmq_url",
  "artemis_url",
  "redis_url",
  "pulsar_url",
  "pulsar_admin_url",
  "database_url",
]);

export interface LoadSettingsOptions {
  /** Environment to read; @default process.env */
  env?: Record<string, string | undefined>;
  /** Settings file; @default env FACTFLOW_SETTINGS_FILE */
  file?: string;
  /** Values that win over env and file (CLI flags, tests). */
  overrides?: Partial<Record<(typeof KEYS)[number], string | number>>;
  /** Base for relative paths; @default process.cwd() */
  cwd?: string;
}

function readSettingsFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`[factflow/server] settings file ${path}`, [
      {
        path: "(file)",
        message: `cannot be read (${(error as NodeJS.ErrnoException).code ?? "error"}); check FACTFLOW_SETTINGS_FILE`,
      },
    ]);
  }
  let data: unknown;
  try {
    data = extname(path) === ".json" ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ConfigError(`[factflow/server] settings file ${path}`, [
      {
        path: "(file)",
        message: `is not valid ${extname(path) === ".json" ? "JSON" : "YAML"}: ${(error as Error).message}`,
      },
    ]);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== "object" || Array.isArray(data)) {
    throw new ConfigError(`[factflow/server] settings file ${path}`, [
      { path: "(file)", message: "must hold a mapping of settings" },
    ]);
  }
  return data as Record<string, unknown>;
}

/**
 * Reads settings from (lowest to highest precedence) the settings file, `FACTFLOW_*` env and
 * `overrides`. Throws one `ConfigError` listing every problem; secrets never appear in it.
 */
export function loadSettings(options: LoadSettingsOptions = {}): Settings {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const file = options.file ?? env.FACTFLOW_SETTINGS_FILE;
  const raw: Record<string, unknown> =
    file === undefined || file === "" ? {} : readSettingsFile(resolve(cwd, file));
  for (const key of KEYS) {
    const value = env[`FACTFLOW_${key.toUpperCase()}`];
    if (value !== undefined && value !== "") raw[key] = value;
  }
  for (const [key, value] of Object.entries(options.overrides ?? {})) {
    if (value !== undefined) raw[key] = value;
  }
  const result = v.safeParse(SettingsSchema, raw);
  if (!result.success) {
    const issues: ConfigIssue[] = result.issues.map((issue) => {
      const key = v.getDotPath(issue) ?? "(settings)";
      // Never echo a secret back; for other keys the received value helps.
      const shown = SECRET_KEYS.has(key) || URL_KEYS.has(key) ? "" : received(raw[key]);
      return { path: key, message: `${issue.message}${shown} (env FACTFLOW_${key.toUpperCase()})` };
    });
    throw new ConfigError("[factflow/server] settings", issues);
  }
  const parsed = result.output;
  const dataDir = resolve(cwd, parsed.data_dir);
  const configDir = resolve(cwd, parsed.config_dir);
  return Object.freeze({
    ...parsed,
    provider: parsed.provider as Settings["provider"],
    data_dir: dataDir,
    storage_root: resolve(cwd, parsed.storage_root ?? resolve(dataDir, "artefacts")),
    config_dir: configDir,
    adapter_dirs: (parsed.adapter_dirs ?? [configDir]).map((dir) => resolve(cwd, dir)),
    allowed_hosts: parsed.allowed_hosts.map((h) => h.toLowerCase()),
    allowed_origins: parsed.allowed_origins.map((o) => o.toLowerCase()),
  });
}

function received(value: unknown): string {
  if (value === undefined) return "";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return ` (got ${JSON.stringify(text.length > 60 ? `${text.slice(0, 57)}...` : text)})`;
}

/** A copy safe to print or log: secrets as `<redacted>`, URL passwords removed. */
export function redactSettings(settings: Settings): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(settings)) {
    if (value === undefined) continue;
    if (SECRET_KEYS.has(key)) out[key] = "<redacted>";
    else if (URL_KEYS.has(key) && typeof value === "string") out[key] = redactUrl(value);
    else out[key] = value;
  }
  return out;
}
