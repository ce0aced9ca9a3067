export type {
  Adapter,
  AdapterDefinition,
  AdapterFactoryContext,
  AdapterMetadata,
  AdapterModule,
  AdapterResult,
  EmittedMessage,
  FlushContext,
  PipelineContext,
  StatefulAdapter,
} from "./adapter.js";
export { isStatefulAdapter } from "./adapter.js";
export type { ProviderCapabilities } from "./capabilities.js";
export type { Delivery, HandlerResult, MessageHandler } from "./delivery.js";
export { unwrapHandlerResult } from "./delivery.js";
export type { Destination, MessageEnvelope, OutboundMessage } from "./envelope.js";
export { deadLetterQueueOf, parseDestination, QUEUE_PREFIX, TOPIC_PREFIX } from "./envelope.js";
export type { ConfigIssue, FactflowErrorCode, FactflowErrorOptions, ProviderErrorReason } from "./errors.js";
export {
  ConfigError,
  FactflowError,
  HandlerTimeoutError,
  isFactflowError,
  isHandlerTimeout,
  PipelineError,
  ProviderError,
} from "./errors.js";
export type {
  ExecutionListQuery,
  ExecutionRecord,
  ExecutionStatus,
  ExecutionStoreProtocol,
  NewExecution,
  StoredConfig,
} from "./execution-store.js";
export type { DeadLetterReason } from "./headers.js";
export { Headers } from "./headers.js";
export type { JsonObject, JsonValue } from "./json.js";
export { findNonJson } from "./json.js";
export {
  DEFAULT_MAX_JSON_DEPTH,
  findJsonHazard,
  type JsonHazard,
  type JsonHazardLimits,
} from "./json-limits.js";
export type {
  LineageCounters,
  LineageErrorInfo,
  LineageKind,
  LineagePageQuery,
  LineageProtocol,
  LineageRow,
  LineageStatus,
  LineageUpdate,
  RecordedInput,
  RouteStatusCount,
} from "./lineage-protocol.js";
export { OPEN_LINEAGE_STATUSES } from "./lineage-protocol.js";
export type { Logger } from "./logger.js";
export { silentLogger } from "./logger.js";
export type { SettlingStatus } from "./message-status.js";
export { isSettlingStatus, MessageStatus } from "./message-status.js";
export { errorText, NETWORK_ERROR_CODES } from "./native-error.js";
export type {
  AdapterConfig,
  InboundConfig,
  InitConfig,
  PipelineConfig,
  PipelineConfigInput,
  PipelineSettings,
  RetryConfig,
  RouteConfig,
} from "./pipeline-config.js";
export {
  AdapterConfigSchema,
  InboundConfigSchema,
  InitConfigSchema,
  PipelineConfigSchema,
  PipelineSettingsSchema,
  RetryConfigSchema,
  RouteConfigSchema,
} from "./pipeline-config.js";
export type {
  DeadLetter,
  DeadLetterPage,
  DeadLetterSource,
  DeleteDestinationOptions,
  DeleteDestinationResult,
  DestinationInfo,
  DestinationStats,
  DurabilityCounters,
  QueueAdminProtocol,
} from "./queue-admin.js";
export type {
  ProviderHealth,
  PublishReceipt,
  QueueProtocol,
  QueueProviderFactory,
} from "./queue-protocol.js";
export type { RetryPolicy } from "./retry-policy.js";
export {
  DEFAULT_RETRY_POLICY,
  RETRY_POLICY_LIMITS,
  resolveRetryPolicy,
  retryDelayMs,
} from "./retry-policy.js";
export type { ArtefactOrigin, ArtefactSidecar, PutOptions, StorageProtocol } from "./storage-protocol.js";
export type { SubscribeOptions, Subscription } from "./subscribe-options.js";
export {
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_PREFETCH,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
} from "./subscribe-options.js";
