export { DEFAULT_LEASE_MS, leaseMsOf } from "./cluster-lease.js";
export type { ComposeOptions } from "./compose.js";
export { composeRuntime } from "./compose.js";
export type { CatalogEntry, ConfigParser, ResolvedConfig } from "./config-catalog.js";
export { ConfigCatalog } from "./config-catalog.js";
export { createConfigValidator, moduleAccessOf } from "./config-validator.js";
export { connectOnFirstUse } from "./lazy-provider.js";
export { meterProvider } from "./metered-provider.js";
export { FactflowMetrics } from "./metrics.js";
export { ProcessLease, processNodeId } from "./process-lease.js";
export type { ProviderOptions } from "./provider-factory.js";
export { createProvider } from "./provider-factory.js";
export type { OpenedQueueDefinitions, QueueDefinitionStore } from "./queue-definition-store.js";
export {
  FileQueueDefinitionStore,
  openQueueDefinitions,
  queueDefinitionStoreFor,
} from "./queue-definition-store.js";
export type { CleanupOutcome, QueueJanitorOptions } from "./queue-janitor.js";
export { QueueJanitor, scopedDestinations } from "./queue-janitor.js";
export type { RetentionJobOptions, RetentionResult, RetentionTrigger } from "./retention.js";
export { RetentionJob } from "./retention.js";
export type { EngineFacade, FactflowRuntime, ProcessOwnership, RuntimeEvent } from "./runtime.js";
export type { LoadSettingsOptions, Settings, SettingsInput } from "./settings.js";
export { loadSettings, redactSettings, redactUrl, SettingsSchema } from "./settings.js";
export { logStall, stallJson } from "./stall.js";
export { registerRequestContext, traceRequests, tracesExportersFromEnv } from "./trace-requests.js";
export type { StartTracingOptions, Tracing } from "./tracing.js";
export { loadTracing } from "./tracing-loader.js";
