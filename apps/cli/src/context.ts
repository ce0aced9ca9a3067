import type { Logger } from "@factflow/protocols";
import type { FactflowRuntime, Settings } from "@factflow/runtime";
import { ApiClient } from "./api-client.js";
import { importModule } from "./module-importer.js";
import type { Output } from "./output.js";

/** Parsed flags shared by every command. */
export interface Flags {
  json: boolean;
  help: boolean;
  server?: string;
  token?: string;
  settings?: string;
  "data-dir"?: string;
  provider?: string;
  lineage?: string;
  input?: string;
  status?: string;
  config?: string;
  "config-version"?: string;
  route?: string;
  kind?: string;
  message?: string[];
  from?: string;
  queue?: string;
  execution?: string;
  subscription?: string;
  limit?: string;
  offset?: string;
  host?: string;
  port?: string;
  "older-than-days"?: string;
  "stall-after"?: string;
  "stall-timeout"?: string;
  wait: boolean;
  force: boolean;
  insecure: boolean;
}

/** Everything a command needs. */
export interface CliContext {
  readonly flags: Flags;
  readonly output: Output;
  readonly env: Record<string, string | undefined>;
  readonly cwd: string;
}

/** A usage mistake: printed with a hint, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** What a command adds to the settings for a local file the user named on purpose. */
export interface LocalFileOptions {
  /** The directory of a pipeline file: its own adapter modules may load from there. */
  readonly adapterDir?: string;
}

/** Settings from env, the settings file and the command line flags. */
export async function settingsOf(ctx: CliContext, local: LocalFileOptions = {}): Promise<Settings> {
  // Imported when a command needs it, so `--help` and usage errors load nothing else.
  const { loadSettings } = await import("@factflow/runtime");
  const overrides: Record<string, string> = {};
  if (ctx.flags["data-dir"] !== undefined) overrides.data_dir = ctx.flags["data-dir"];
  if (ctx.flags.provider !== undefined) overrides.provider = ctx.flags.provider;
  if (ctx.flags.lineage !== undefined) overrides.lineage = ctx.flags.lineage;
  if (ctx.flags.host !== undefined) overrides.host = ctx.flags.host;
  if (ctx.flags.port !== undefined) overrides.port = ctx.flags.port;
  if (ctx.flags.insecure) overrides.insecure = "1";
  if (ctx.flags["stall-after"] !== undefined) overrides.stall_after_s = ctx.flags["stall-after"];
  const settings = loadSettings({
    env: ctx.env,
    cwd: ctx.cwd,
    ...(ctx.flags.settings === undefined ? {} : { file: ctx.flags.settings }),
    overrides,
  });
  if (local.adapterDir === undefined) return settings;
  return Object.freeze({ ...settings, adapter_dirs: [...settings.adapter_dirs, local.adapterDir] });
}

/** A logger for commands: warnings and errors only, as plain lines on stderr. */
export function cliLogger(output: Output, verbose = false): Logger {
  const write = (level: string, message: string, fields?: Record<string, unknown>) =>
    output.err(
      `${level}: ${message}${fields === undefined || Object.keys(fields).length === 0 ? "" : ` ${JSON.stringify(fields)}`}`,
    );
  const logger: Logger = {
    debug: () => {},
    info: (m, f) => {
      if (verbose) write("info", m, f);
    },
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    child: () => logger,
  };
  return logger;
}

/** The server URL from `--server` / FACTFLOW_SERVER_URL, if the user named one. */
export function serverUrlOf(ctx: CliContext): string | undefined {
  const server = ctx.flags.server ?? ctx.env.FACTFLOW_SERVER_URL;
  return server === undefined || server === "" ? undefined : server;
}

/** An API client plus what to close when done: the remote server, or an in-process runtime. */
export interface Backend {
  readonly client: ApiClient;
  /** The in-process runtime when no server is configured. */
  readonly runtime?: FactflowRuntime;
  close(): Promise<void>;
}

/**
 * Remote commands talk to `--server` / FACTFLOW_SERVER_URL. Without one they run the same API in
 * process against the local data directory (the one `factflow run` wrote).
 */
export async function openBackend(ctx: CliContext, local: LocalFileOptions = {}): Promise<Backend> {
  const server = serverUrlOf(ctx);
  const token = ctx.flags.token ?? ctx.env.FACTFLOW_API_TOKEN;
  if (server !== undefined) {
    return { client: ApiClient.remote(server, token), close: async () => {} };
  }
  const settings = await settingsOf(ctx, local);
  const { composeRuntime } = await import("@factflow/runtime");
  // The local backend answers through the same HTTP API a server does.
  const { createApp } = await import("@factflow/server");
  const { formatStallDiagnosis } = await import("@factflow/engine");
  // Short-lived: no retention schedule here (`factflow executions prune` runs it on demand).
  const runtime = await composeRuntime(settings, {
    logger: cliLogger(ctx.output),
    progressIntervalMs: 250,
    scheduleRetention: false,
    importModule,
    // Reads (executions, lineage, configs) never open the broker; runs and dead letters do.
    connectProvider: "first-use",
    // Traces (docs/observability.md) when the OTEL_* variables ask for them; exported on close.
    serviceName: "factflow-cli",
    // An execution run here (config run, replay, resume) that stops moving: what it waits for.
    onExecutionStalled: (_, diagnosis) => ctx.output.err(formatStallDiagnosis(diagnosis)),
  });
  // A failed request comes back as an error answer that the command prints; no second JSON line.
  const app = createApp(runtime, { log: () => {} });
  const client = new ApiClient(async (path, init) => app.request(path, init), settings.api_token);
  return { client, runtime, close: () => runtime.close() };
}
