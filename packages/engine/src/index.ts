export type {
  AdapterRegistry,
  AdapterRegistryOptions,
  ModuleImporter,
  ModuleLoadFailure,
} from "./config/adapter-registry.js";
export { createAdapterRegistry } from "./config/adapter-registry.js";
export type { LoadPipelineConfigOptions } from "./config/load-pipeline-config.js";
export { DEFAULT_MAX_CONFIG_BYTES, loadPipelineConfig } from "./config/load-pipeline-config.js";
export { type ModuleAccess, NO_MODULE_ACCESS } from "./config/module-access.js";
export type { Engine, EngineOptions } from "./create-engine.js";
export { createEngine } from "./create-engine.js";
export type { RouteCounters } from "./delivery/route-processor.js";
export {
  DELIVERY_ABANDONED,
  ExecutionNotFoundError,
  FatalAdapterError,
  TooManyConcurrentExecutionsError,
} from "./errors.js";
export type {
  ExecutionEvent,
  ExecutionEventListener,
  ExecutionEventType,
} from "./execution/execution-events.js";
export { TERMINAL_EVENT_TYPES } from "./execution/execution-events.js";
export type { ExecutionEndContext, ExecutionHooks } from "./execution/execution-hooks.js";
export type { ExecutionProgress, RouteActivity } from "./execution/execution-progress.js";
// The services an `Engine` exposes, as types: they are reached through `createEngine`, never built.
export type {
  CreateExecutionRequest,
  ExecutionService,
  ReplayRequest,
} from "./execution/execution-service.js";
export type { OrchestratorManager, StartRequest, StartSlot } from "./execution/orchestrator-manager.js";
export type { ScopedDestination } from "./execution/scoped-destination.js";
export { parseScopedDestination, scopedDestination } from "./execution/scoped-destination.js";
export { canonicalJson, hashJson, uuidv7 } from "./ids.js";
export type { RouteStall, StallDiagnosis } from "./stall/stall-diagnosis.js";
export { formatStallDiagnosis } from "./stall/stall-report.js";
export { DEFAULT_STALL_AFTER_MS } from "./stall/stall-watch.js";
