export type {
  CatalogEntry,
  ComposeOptions,
  ConfigParser,
  EngineFacade,
  FactflowRuntime,
  LoadSettingsOptions,
  ResolvedConfig,
  RetentionJobOptions,
  RetentionResult,
  RetentionTrigger,
  RuntimeEvent,
  Settings,
  SettingsInput,
} from "@factflow/runtime";
// The composition root moved to @factflow/runtime; these names stay importable from the server.
export {
  ConfigCatalog,
  composeRuntime,
  createConfigValidator,
  FactflowMetrics,
  loadSettings,
  logStall,
  meterProvider,
  moduleAccessOf,
  RetentionJob,
  redactSettings,
  redactUrl,
  SettingsSchema,
  stallJson,
} from "@factflow/runtime";
export type { AppOptions, AppType } from "./app.js";
export { createApp } from "./app.js";
export type { ErrorBody } from "./http-errors.js";
export { ExecutionNotRunningError, HttpProblem, toHttpError } from "./http-errors.js";
export type { CreateLoggerOptions, LogLevel } from "./logger.js";
export { createJsonLogger, createLogger, createPinoLogger, fromPino } from "./logger.js";
export type { DiagnosticResult } from "./mq-diagnostic.js";
export { diagnosticLine, runMqDiagnostic } from "./mq-diagnostic.js";
export { OPERATIONS, openApiDocument } from "./openapi.js";
export { assertRedriveAllowed, executionOfDestination } from "./redrive-guard.js";
export { executionJson, lineageJson, routeCountsJson } from "./serialize.js";
export type { RunningServer, StartServerOptions } from "./server.js";
export { startServer } from "./server.js";
