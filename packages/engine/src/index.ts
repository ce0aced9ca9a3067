export type { AdapterRegistry, AdapterRegistryOptions, ModuleLoadFailure } from "./adapter-registry.js";
export { createAdapterRegistry } from "./adapter-registry.js";
export { CompletionGate } from "./completion-gate.js";
export type { Engine, EngineOptions } from "./create-engine.js";
export { createEngine } from "./create-engine.js";
export {
  DELIVERY_ABANDONED,
  ExecutionNotFoundError,
  FatalAdapterError,
  TooManyConcurrentExecutionsError,
} from "./errors.js";
export type {
  ExecutionEvent,
  ExecutionEventHubOptions,
  ExecutionEventListener,
  ExecutionEventType,
} from "./execution-events.js";
export { ExecutionEventHub, TERMINAL_EVENT_TYPES } from "./execution-events.js";
export type { ExecutionHooks } from "./execution-hooks.js";
export type { ExecutionProgress, RouteActivity } from "./execution-progress.js";
export { ExecutionScopedQueue, subscriptionSuffix } from "./execution-scoped-queue.js";
export type { CreateExecutionRequest, ReplayRequest } from "./execution-service.js";
export { ExecutionService } from "./execution-service.js";
export { canonicalJson, hashJson, uuidv7 } from "./ids.js";
export type { LoadPipelineConfigOptions } from "./load-pipeline-config.js";
export { DEFAULT_MAX_CONFIG_BYTES, loadPipelineConfig } from "./load-pipeline-config.js";
export { checkModule, type ModuleAccess, type ModuleCheck, NO_MODULE_ACCESS } from "./module-access.js";
export type { OrchestratorManagerOptions, StartRequest, StartSlot } from "./orchestrator-manager.js";
export { OrchestratorManager } from "./orchestrator-manager.js";
export type {
  ExecutionSeed,
  OrchestratorEnd,
  OrchestratorServices,
  PipelineOrchestratorOptions,
} from "./pipeline-orchestrator.js";
export { PipelineOrchestrator } from "./pipeline-orchestrator.js";
export type { ReseedMessage } from "./reseed.js";
export { RESEED_HEADER } from "./reseed.js";
export type { RouteCounters } from "./route-processor.js";
export type { ScopedDestination } from "./scoped-destination.js";
export { parseScopedDestination, scopedDestination } from "./scoped-destination.js";
export type { RouteStall, StallDiagnosis } from "./stall-diagnosis.js";
export { formatStallDiagnosis } from "./stall-report.js";
export { DEFAULT_STALL_AFTER_MS } from "./stall-watch.js";
