import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { hostname } from "node:os";
import { adapters as builtinAdapters } from "@factflow/adapters";
import {
  createEngine,
  type Engine,
  type ExecutionHooks,
  loadPipelineConfig,
  type ModuleImporter,
  parseScopedDestination,
  type StallDiagnosis,
  TERMINAL_EVENT_TYPES,
} from "@factflow/engine";
import { ClusterNotifications, ExecutionStore, openLineageDatabase } from "@factflow/lineage";
import type {
  AdapterDefinition,
  ExecutionRecord,
  ExecutionStoreProtocol,
  Logger,
  PipelineConfig,
  QueueProtocol,
  StorageProtocol,
} from "@factflow/protocols";
import { createFileStorage } from "@factflow/storage";
import { discoveryMsOf, leaseMsOf } from "./cluster-lease.js";
import { ConfigCatalog } from "./config-catalog.js";
import { moduleAccessOf } from "./config-validator.js";
import { connectOnFirstUse } from "./lazy-provider.js";
import { meterProvider } from "./metered-provider.js";
import { FactflowMetrics } from "./metrics.js";
import { ProcessLease, processNodeId } from "./process-lease.js";
import { createProvider } from "./provider-factory.js";
import { openQueueDefinitions } from "./queue-definition-store.js";
import { QueueJanitor } from "./queue-janitor.js";
import { RetentionJob } from "./retention.js";
import type { EngineFacade, FactflowRuntime } from "./runtime.js";
import type { Settings } from "./settings.js";
import { logStall } from "./stall.js";
import { tracesExportersFromEnv } from "./trace-requests.js";
import type { Tracing } from "./tracing.js";

/** Longest one step of `close` may take before it is given up on. */
const CLOSE_STEP_MS = 15_000;

/** Resolves with `work`, or rejects once `ms` have passed without it settling. */
async function boundedStep(work: Promise<void>, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        // Not unref'd: a step waiting on something that keeps no handle (a promise nobody settles)
        // would otherwise let the process end mid-close (exit code 13, "unsettled top-level await").
        timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms; going on`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ComposeOptions {
  readonly logger: Logger;
  /** Extra adapter definitions besides the built-ins. */
  readonly adapters?: readonly AdapterDefinition[];
  /** How an allowed adapter module is imported (the CLI compiles TypeScript modules). @default `import()` */
  readonly importModule?: ModuleImporter;
  /** Interval of `route_progress` events. @default 500 */
  readonly progressIntervalMs?: number;
  /** Storage to use instead of the file storage under `storage_root`. */
  readonly storage?: StorageProtocol;
  /**
   * Run the retention schedule when `retention_days` > 0. The CLI's short-lived in-process runtime
   * turns it off. @default true
   */
  readonly scheduleRetention?: boolean;
  /** Time between scheduled retention runs. @default 3_600_000 */
  readonly retentionIntervalMs?: number;
  /** Delay of the first scheduled retention run. @default 60_000 */
  readonly retentionInitialDelayMs?: number;
  /**
   * When the provider connects: `eager` (before this resolves, as a server wants) or `first-use`
   * (at its first publish, subscribe or admin call; CLI commands that only read the database never
   * open the broker). @default "eager"
   */
  readonly connectProvider?: "eager" | "first-use";
  /**
   * OpenTelemetry tracing (docs/observability.md): by default started from the `OTEL_*` variables
   * (off when they name no exporter) and shut down on close. A `Tracing` given here is used as is and
   * left running on close; `false` turns tracing off whatever the environment says.
   */
  readonly tracing?: Tracing | false;
  /** `service.name` of the traces when `OTEL_SERVICE_NAME` is not set. @default "factflow" */
  readonly serviceName?: string;
  /**
   * Cluster mode (docs/deployment.md): with a shared broker and PostgreSQL lineage, this process
   * joins every running execution and takes over after servers that died. `auto` turns it on for
   * exactly that combination unless env `FACTFLOW_CLUSTER=off`. @default "auto" for a server,
   * "off" for the CLI's short-lived runtimes (`scheduleRetention: false`)
   */
  readonly cluster?: "auto" | "off";
  /**
   * Told once per stall of an execution (no progress for `stall_after_s`) what it waits for.
   * @default a warning in the log with the diagnosis
   */
  readonly onExecutionStalled?: (record: ExecutionRecord, diagnosis: StallDiagnosis) => void;
}

/** Pause between a cluster owner's tries to delete a queue other servers still consume. */
const CLEANUP_RETRY_MS = 500;

/** In cluster mode lost lineage writes are reconciled late: a takeover re-publishes first. */
const CLUSTER_RECONCILE_AFTER_MS = 120_000;

/** The cluster settings of this process, or undefined when it runs alone. */
function clusterSettings(
  settings: Settings,
  options: ComposeOptions,
  provider: QueueProtocol,
  executions: ExecutionStoreProtocol,
  nodeId: string,
  cleanUpQueues: (record: ExecutionRecord) => void,
  logger: Logger,
):
  | {
      nodeId: string;
      leaseMs: number;
      discoveryMs: number;
      store: ReturnType<ExecutionStore["cluster"]>;
      changes: ClusterNotifications;
      cleanUpQueues: (record: ExecutionRecord) => void;
      claimDeadNode?: (nodeId: string) => Promise<void>;
    }
  | undefined {
  const providerName = provider.name;
  const mode = options.cluster ?? (options.scheduleRetention === false ? "off" : "auto");
  const env = process.env;
  if (mode === "off" || env.FACTFLOW_CLUSTER === "off") return undefined;
  const databaseUrl = settings.database_url;
  const shared = providerName !== "embedded" && settings.lineage === "database" && databaseUrl;
  if (!shared || !(executions instanceof ExecutionStore)) return undefined;
  const cap = Number(env.FACTFLOW_CLUSTER_MAX_RUNNING);
  executions.limitRunning(Number.isInteger(cap) && cap >= 1 ? cap : undefined);
  return {
    nodeId,
    leaseMs: leaseMsOf(env),
    discoveryMs: discoveryMsOf(env),
    store: executions.cluster(),
    // Wakes discovery at once when another server creates or ends an execution (PostgreSQL LISTEN).
    changes: new ClusterNotifications({ databaseUrl, logger }),
    // The queues of an execution that ended while its owner was dead: the server taking over cleans them.
    cleanUpQueues,
    // Redis moves a dead consumer's entries only after the visibility timeout; a takeover claims them.
    ...(provider.claimFromNode === undefined
      ? {}
      : { claimDeadNode: (dead: string) => provider.claimFromNode?.(dead) ?? Promise.resolve() }),
  };
}

/** Maps `/queue/<execution>/<queue>` to route labels, from the snapshots of executions started here. */
class RouteIndex {
  private readonly byExecution = new Map<string, Map<string, string>>();
  add(executionId: string, config: PipelineConfig): void {
    const map = new Map<string, string>();
    for (const [route, spec] of Object.entries(config.routes)) map.set(spec.inbound.queue, route);
    this.byExecution.set(executionId, map);
  }
  remove(executionId: string): void {
    this.byExecution.delete(executionId);
  }
  resolve = (destination: string): { route: string; queue: string } => {
    const scoped = parseScopedDestination(destination);
    if (scoped === undefined)
      return { route: "(none)", queue: destination.replace(/^\/(queue|topic)\//, "") };
    const { executionId, queue } = scoped;
    return { route: this.byExecution.get(executionId)?.get(queue) ?? queue, queue };
  };
}

/**
 * What the server keeps beside each execution that runs here, wired to the engine's lifecycle hooks.
 * Started: label its routes (the engine calls this before subscribing, so the first delivery's
 * metrics already carry its route) and count it running. Ended: record how it ended and, unless the
 * server is only stopping (the execution stays running, to be resumed), delete its broker queues
 * when this server owns the execution (in a cluster the others only drop their subscriptions).
 */
function executionHooks(options: {
  readonly routes: RouteIndex;
  readonly metrics: FactflowMetrics;
  readonly janitor: QueueJanitor;
  readonly executions: ExecutionStoreProtocol;
  /**
   * In a cluster: whether an execution's owner still holds a live lease. A server that does not own
   * an ended execution cleans its queues only when its owner is gone.
   */
  readonly ownerLive?: (executionId: string) => Promise<boolean>;
  readonly onStalled: NonNullable<ExecutionHooks["onExecutionStalled"]>;
}): ExecutionHooks {
  const { routes, metrics, janitor, executions, ownerLive } = options;
  return {
    onExecutionStalled: options.onStalled,
    onExecutionStarted(record) {
      routes.add(record.id, record.configSnapshot);
      metrics.executionsRunning.inc();
    },
    async onExecutionEnded(record, end, context) {
      metrics.executionsRunning.dec();
      // Keep route labels a little longer: late settlements of this execution still resolve.
      setTimeout(() => routes.remove(record.id), 60_000).unref();
      if (end === "stopped") return;
      // Its subscriptions are stopped by now (the engine stops them before calling this hook). In a
      // cluster one server cleans: the owner, which waits for the others' consumers to leave. An
      // owner that gave its lease back before anyone claimed the execution cleans nothing, so then
      // the others do; a dead owner's lease still runs, and the server taking it over cleans.
      if (context.owner) void janitor.sweep(record.id, record.configSnapshot);
      else if (ownerLive !== undefined)
        // Unknown (the database did not answer): cleaning too is harmless, deletion is `ifEmpty`.
        void ownerLive(record.id)
          .catch(() => false)
          .then((live) => (live ? undefined : janitor.sweep(record.id, record.configSnapshot)));
      const final = await executions.getExecution(record.id, { includeInput: false });
      const finishedAt = final?.finishedAt ? Date.parse(final.finishedAt) : Date.now();
      metrics.executions.inc({ status: end });
      metrics.completionSeconds.observe(Math.max(0, finishedAt - Date.parse(record.createdAt)) / 1000);
    },
  };
}

/**
 * Builds everything from settings: the provider (connected, metered), the lineage database, storage,
 * the engine and the config catalog. The one place concrete implementations meet.
 */
export async function composeRuntime(settings: Settings, options: ComposeOptions): Promise<FactflowRuntime> {
  const { logger } = options;
  const metrics = new FactflowMetrics();
  const routes = new RouteIndex();
  await mkdir(settings.data_dir, { recursive: true });

  // Known before the provider exists: on Redis it names the consumers (see `claimDeadNode`).
  const clusterNodeId =
    process.env.FACTFLOW_NODE_ID || `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const created = await createProvider(settings, logger, {
    leaseMs: leaseMsOf(process.env),
    nodeId: clusterNodeId,
  });
  const rawProvider = options.connectProvider === "first-use" ? connectOnFirstUse(created) : created;
  if (options.connectProvider !== "first-use") await rawProvider.connect();
  const closers: (() => Promise<void>)[] = [() => rawProvider.close()];
  try {
    const provider: QueueProtocol = meterProvider(rawProvider, metrics, routes.resolve);
    const db = await openLineageDatabase({
      ...(settings.lineage === "memory" ? { memory: true } : {}),
      ...(settings.database_url === undefined ? {} : { databaseUrl: settings.database_url }),
      dataDir: settings.data_dir,
      logger,
    });
    closers.unshift(() => db.close());
    // Named queue definitions: shared through the database on PostgreSQL, else in the data dir.
    const queueDefinitions = await openQueueDefinitions(settings.data_dir, db, logger);
    closers.unshift(() => queueDefinitions.close());
    let storage: StorageProtocol;
    if (options.storage === undefined) {
      const files = createFileStorage({ root: settings.storage_root });
      // Half-written artefacts of a process that crashed mid-write; never read, only in the way.
      void files.sweepTemporaryFiles().then(
        (removed) => {
          if (removed > 0) logger.info("removed temp files of interrupted artefact writes", { removed });
        },
        (error: Error) => logger.warn("could not sweep artefact temp files", { error: error.message }),
      );
      storage = files;
    } else {
      storage = options.storage;
    }
    const cluster = clusterSettings(
      settings,
      options,
      created,
      db.executions,
      clusterNodeId,
      (record) => void janitor.sweep(record.id, record.configSnapshot),
      logger,
    );
    // Deletes each ended execution's scoped queues (ifEmpty, dead letters kept) so they do not pile up.
    // In a cluster the owner cleans, and the other servers' consumers leave once they learn of the
    // end: by notification at once, at worst at their next discovery pass, which the retries cover.
    const janitor = new QueueJanitor({
      provider: rawProvider,
      logger,
      metrics,
      ...(cluster === undefined
        ? {}
        : {
            attempts: Math.ceil((2 * cluster.discoveryMs) / CLEANUP_RETRY_MS) + 1,
            retryDelayMs: CLEANUP_RETRY_MS,
          }),
    });
    // OpenTelemetry's SDK is loaded only when the OTEL_* variables turn tracing on.
    const ownTracing =
      options.tracing === undefined && tracesExportersFromEnv(process.env).length > 0
        ? (await import("./tracing.js")).startTracing({ serviceName: options.serviceName ?? "factflow" })
        : undefined;
    const tracing = ownTracing ?? (options.tracing === false ? undefined : options.tracing);
    if (ownTracing !== undefined) logger.info("OpenTelemetry tracing is on (OTEL_* variables)");
    // Leases and owners live in the database (none with `lineage: memory`: nothing is shared).
    const leaseStore = db.executions instanceof ExecutionStore ? db.executions.cluster() : undefined;
    // Outside a cluster, a lease of its own: other processes on this database leave its executions be.
    const lease =
      cluster === undefined && leaseStore !== undefined
        ? new ProcessLease({
            store: leaseStore,
            nodeId: await processNodeId(settings.data_dir),
            leaseMs: leaseMsOf(process.env),
            logger,
          })
        : undefined;
    if (lease !== undefined) closers.unshift(() => lease.stop());
    const owner = cluster ?? lease;
    const engine: Engine = createEngine({
      queue: provider,
      lineage: db.lineage,
      executions: db.executions,
      hooks: executionHooks({
        routes,
        metrics,
        janitor,
        executions: db.executions,
        ...(cluster === undefined
          ? {}
          : { ownerLive: (executionId: string) => cluster.store.executionOwnerLive(executionId) }),
        onStalled: options.onExecutionStalled ?? logStall(logger),
      }),
      stallAfterMs: settings.stall_after_s * 1000,
      storage,
      adapters: [...builtinAdapters, ...(options.adapters ?? [])],
      logger,
      maxConcurrent: settings.max_concurrent,
      // Code comes only from where the operator pointed when the server started, never from a request.
      moduleAccess: moduleAccessOf(settings),
      ...(options.importModule === undefined ? {} : { importModule: options.importModule }),
      // Only the in-process provider guarantees the publisher is the consumer; with a shared broker
      // another server may consume the message, so its lineage row must be committed first.
      strictLineage: rawProvider.name !== "embedded",
      // Named queue definitions (PUT /api/v1/queues/{name}/definition).
      queueDefinitions: queueDefinitions.store,
      ...(cluster === undefined ? {} : { cluster, reconcileAfterMs: CLUSTER_RECONCILE_AFTER_MS }),
      ...(owner === undefined ? {} : { nodeId: owner.nodeId }),
      ...(options.progressIntervalMs === undefined ? {} : { progressIntervalMs: options.progressIntervalMs }),
      ...(tracing === undefined ? {} : { tracer: tracing.tracer }),
    });
    if (engine.cluster !== undefined) {
      const node = engine.cluster;
      closers.unshift(() => node.stop());
      await node.start();
      logger.info("cluster mode: this server joins the running executions of every server", {
        nodeId: node.nodeId,
        leaseMs: cluster?.leaseMs,
      });
    }
    const parseConfig = (source: string, path: string, label?: string) =>
      loadPipelineConfig(source, {
        path,
        ...(label === undefined ? {} : { label }),
        registry: engine.registry,
        maxRoutes: settings.config_max_routes,
        maxBytes: settings.config_max_bytes,
      });
    const configs = new ConfigCatalog(settings.config_dir, db.executions, parseConfig);

    metrics.addCollector({
      collect: () => {
        const lineage = db.lineage.counters();
        const durability = rawProvider.counters();
        return [
          {
            name: "factflow_lineage_writes_total",
            help: "Lineage rows and updates committed.",
            type: "counter",
            samples: [{ value: lineage.written }],
          },
          {
            name: "factflow_lineage_write_retries_total",
            help: "Lineage writes that failed and were retried.",
            type: "counter",
            samples: [{ value: lineage.retriedWrites }],
          },
          {
            name: "factflow_lineage_write_failures_total",
            help: "Lineage writes given up after retries (lineage missing; should stay 0).",
            type: "counter",
            samples: [{ value: lineage.lost }],
          },
          {
            name: "factflow_lineage_writes_queued",
            help: "Lineage writes queued, not yet committed.",
            type: "gauge",
            samples: [{ value: lineage.queued }],
          },
          {
            name: "factflow_provider_problems",
            help: "Damage the provider found and worked around (e.g. unreadable journal records); see /readyz.",
            type: "gauge",
            samples: [
              { labels: { provider: rawProvider.name }, value: rawProvider.health?.().problems.length ?? 0 },
            ],
          },
          {
            name: "factflow_provider_messages_total",
            help: "Provider durability counters by event (published, confirmed, acked, retried, deadLettered, redelivered, superseded, lost).",
            type: "counter",
            samples: Object.entries(durability).map(([event, value]) => ({
              labels: { provider: rawProvider.name, event },
              value,
            })),
          },
        ];
      },
    });

    const retention = new RetentionJob({
      executions: db.executions,
      logger,
      metrics,
      retentionDays: settings.retention_days,
      ...(options.retentionIntervalMs === undefined ? {} : { intervalMs: options.retentionIntervalMs }),
      ...(options.retentionInitialDelayMs === undefined
        ? {}
        : { initialDelayMs: options.retentionInitialDelayMs }),
    });
    if (options.scheduleRetention !== false) retention.start();

    // The lease is taken before the first execution row names this process as its owner.
    const leased = async () => {
      await lease?.start();
    };
    const facade: EngineFacade = {
      create: async (request) => {
        await leased();
        return engine.service.create({
          config: request.config,
          configName: request.configName,
          configVersion: request.configVersion,
          input: request.input,
        });
      },
      cancel: async (id) => {
        await engine.service.cancel(id);
        return engine.service.get(id);
      },
      // Asked for by name: it runs here from now on, whoever owned it.
      resume: async (id) => {
        await leased();
        if (owner !== undefined) await leaseStore?.setExecutionOwner(id, owner.nodeId);
        return engine.service.resume(id);
      },
      replay: async (id, request) => {
        await leased();
        return engine.service.replay(id, request);
      },
      async *events(id, { afterId, signal }) {
        for await (const event of engine.service.events(id, { afterId, signal })) {
          yield { id: event.id, type: event.type, data: { ...event.data, at: event.at } };
          if (TERMINAL_EVENT_TYPES.has(event.type)) return;
        }
      },
      waitForEnd: async (id) => {
        await engine.service.waitForEnd(id);
        return engine.service.get(id);
      },
      active: () => engine.manager.active().length,
      fail: async (id, error) => {
        await engine.service.fail(id, error);
        return engine.service.get(id);
      },
      progress: () =>
        engine.manager.active().flatMap((id) => {
          const progress = engine.service.progress(id);
          return progress === undefined ? [] : [progress];
        }),
      diagnose: (id) => engine.service.diagnose(id),
      stall: (id) => engine.service.stall(id),
      runningHere: () => engine.manager.active(),
      shutdown: () => engine.shutdown(),
    };

    let closing: Promise<void> | undefined;
    return {
      settings,
      provider,
      lineage: db.lineage,
      executions: db.executions,
      storage,
      configs,
      metrics,
      engine: facade,
      retention,
      queueCleanup: janitor,
      queueDefinitions: queueDefinitions.store,
      ...(owner === undefined || leaseStore === undefined
        ? {}
        : {
            ownership: {
              nodeId: owner.nodeId,
              leaseMs: owner.leaseMs,
              claim: async (executionId: string) => {
                await leased();
                return leaseStore.claimExecution(executionId, owner.nodeId);
              },
            },
          }),
      parseConfig,
      close() {
        // Every step is bounded: a step that never settles (a database pool waiting on a query that
        // will not answer) is logged and skipped, so commands and the server always exit.
        const step = (what: string, work: () => Promise<void>) =>
          boundedStep(work(), CLOSE_STEP_MS, what).catch((error: Error) =>
            logger.error(`${what} failed during close`, { error: error.message }),
          );
        closing ??= (async () => {
          await step("engine shutdown", () => engine.shutdown());
          await step("queue janitor", () => janitor.stop());
          await step("retention job", () => retention.stop());
          for (const [index, close] of closers.entries())
            await step(index === closers.length - 1 ? "provider close" : "database close", close);
          if (ownTracing !== undefined) await step("trace export", () => ownTracing.shutdown());
        })();
        return closing;
      },
    };
  } catch (error) {
    for (const close of closers) await close().catch(() => undefined);
    throw error;
  }
}
