import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { ModuleImporter } from "@factflow/engine";
import { FactflowError, type Logger, type StorageProtocol } from "@factflow/protocols";
import {
  composeRuntime,
  type FactflowRuntime,
  redactSettings,
  type Settings,
  traceRequests,
} from "@factflow/runtime";
import { serve } from "@hono/node-server";
import { createApp } from "./app.js";
import { isLoopbackHost } from "./guards/host-guard.js";
import { createLogger } from "./logger.js";
import { OrphanResumer } from "./orphan-resume.js";

/** A listening server. */
export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly runtime: FactflowRuntime;
  /** Graceful stop: refuse new requests, stop the engine, close provider and database. Idempotent. */
  close(): Promise<void>;
}

export interface StartServerOptions {
  readonly logger?: Logger;
  /** Install SIGINT/SIGTERM handlers that close the server. @default false */
  readonly handleSignals?: boolean;
  /**
   * Resume executions left `running` whose owner is gone, leaving those of a live process to it
   * (embedded provider only: nobody else consumes its queues). @default true
   */
  readonly resumeRunning?: boolean;
  /** Passed to the engine. */
  readonly progressIntervalMs?: number;
  /** How an allowed adapter module is imported. @default `import()` */
  readonly importModule?: ModuleImporter;
  /** Storage to use instead of the file storage under `storage_root`. */
  readonly storage?: StorageProtocol;
}

/** Composes the runtime from settings and serves the HTTP API on `settings.host:settings.port`. */
export async function startServer(
  settings: Settings,
  options: StartServerOptions = {},
): Promise<RunningServer> {
  const logger = options.logger ?? createLogger();
  assertExposureIsProtected(settings, logger);
  logger.info("starting factflow server", { settings: redactSettings(settings) });
  const runtime = await composeRuntime(settings, {
    logger,
    ...(options.progressIntervalMs === undefined ? {} : { progressIntervalMs: options.progressIntervalMs }),
    ...(options.importModule === undefined ? {} : { importModule: options.importModule }),
    ...(options.storage === undefined ? {} : { storage: options.storage }),
  });
  let shuttingDown = false;
  const app = createApp(runtime, {
    isShuttingDown: () => shuttingDown,
    log: (message, fields) => logger.error(message, fields),
  });
  let server!: Server;
  const address = await new Promise<AddressInfo>((resolve, reject) => {
    server = serve(
      { fetch: traceRequests(app.fetch), hostname: settings.host, port: settings.port },
      resolve,
    ) as Server;
    server.once("error", reject);
  }).catch(async (error: NodeJS.ErrnoException) => {
    await runtime.close();
    throw new FactflowError(
      "invalid_argument",
      `[factflow/server] cannot listen on ${settings.host}:${settings.port} (${error.code ?? error.message}); ` +
        "choose another FACTFLOW_PORT / FACTFLOW_HOST or stop the process using it",
      { cause: error },
    );
  });
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;

  // Nobody else consumes an embedded provider's queues: what it left running, this server resumes.
  const orphans =
    options.resumeRunning !== false && settings.provider === "embedded"
      ? new OrphanResumer(runtime, logger)
      : undefined;

  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      shuttingDown = true;
      logger.info("shutting down: refusing new connections, stopping executions");
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await orphans?.stop();
      await runtime.close();
      // SSE streams of executions that will resume elsewhere never end by themselves.
      server.closeAllConnections();
      await stopped;
      logger.info("factflow server stopped");
    })();
    return closing;
  };

  if (options.handleSignals === true) {
    const onSignal = (signal: string) => {
      logger.info("signal received", { signal });
      void close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    };
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  // Only now: whoever waits for this line may signal at once, and a signal that comes before its
  // handler is installed ends the process without closing anything.
  logger.info("factflow server listening", { url, provider: runtime.provider.name });
  void orphans?.start();
  return { url, port: address.port, runtime, close };
}

/** Beyond loopback, anyone who can reach the port could run pipelines: that needs a token. */
function assertExposureIsProtected(settings: Settings, logger: Logger): void {
  if (isLoopbackHost(settings.host) || settings.api_token !== undefined) return;
  if (settings.insecure) {
    logger.warn(
      "serving beyond loopback without an API token: anyone who reaches the port can start, cancel and delete executions",
      {
        host: settings.host,
      },
    );
    return;
  }
  throw new FactflowError(
    "invalid_argument",
    `[factflow/server] refusing to listen on ${settings.host} without an API token: anyone who reaches it could run pipelines. ` +
      "Set FACTFLOW_API_TOKEN (16+ characters, e.g. `openssl rand -hex 24`), bind to 127.0.0.1, or set FACTFLOW_INSECURE=1 to accept the risk",
  );
}
