export type {
  Adapter,
  AdapterDefinition,
  AdapterFactoryContext,
  AdapterModule,
  AdapterResult,
  EmittedMessage,
  FlushContext,
  PipelineContext,
  StatefulAdapter,
} from "./adapter.js";
export { isStatefulAdapter } from "./adapter.js";
export type { Backoff } from "./backoff.js";
export { backoffDelayMs } from "./backoff.js";
export type { ProviderCapabilities } from "./capabilities.js";
export type { Delivery, HandlerResult, MessageHandler } from "./delivery.js";
export { settleAfterOf, unwrapHandlerResult } from "./delivery.js";
export type { Destination, MessageEnvelope, OutboundMessage } from "./envelope.js";
export { deadLetterQueueOf, parseDestination, QUEUE_PREFIX, TOPIC_PREFIX } from "./envelope.js";
export type { ConfigIssue, FactflowErrorCode, ProviderErrorReason } from "./errors.js";
export {
  ConfigError,
  DeliveryLostError,
  FactflowError,
  HandlerTimeoutError,
  isDeliveryLost,
  isFactflowError,
  isHandlerTimeout,
  PipelineError,
  ProviderError,
} from "./errors.js";
export type {
  ExecutionListQuery,
  ExecutionReadOptions,
  ExecutionRecord,
  ExecutionSort,
  ExecutionStatus,
  ExecutionStoreProtocol,
  NewExecution,
  StoredConfig,
} from "./execution-store.js";
export { EXECUTION_STATUS_ORDER } from "./execution-store.js";
export type { DeadLetterReason } from "./headers.js";
export { Headers } from "./headers.js";
export type { JsonObject, JsonValue } from "./json.js";
export { findNonJson } from "./json.js";
export { DEFAULT_MAX_JSON_DEPTH, findJsonHazard, JsonHazardWalk } from "./json-limits.js";
export type {
  LineageCounters,
  LineageErrorInfo,
  LineageKind,
  LineagePageQuery,
  LineageProtocol,
  LineageRow,
  LineageStatus,
  LineageTree,
  LineageTreeQuery,
  LineageUpdate,
  RecordedInput,
  RouteStatusCount,
} from "./lineage-protocol.js";
export {
  DEFAULT_LINEAGE_TREE_LIMIT,
  MAX_LINEAGE_TREE_LIMIT,
  OPEN_LINEAGE_STATUSES,
} from "./lineage-protocol.js";
export type { Logger } from "./logger.js";
export { silentLogger } from "./logger.js";
export { isSettlingStatus, MessageStatus } from "./message-status.js";
export { errorText, NETWORK_ERROR_CODES } from "./native-error.js";
export type { PipelineConfig, QueueDefinition, RetryConfig, RouteConfig } from "./pipeline-config.js";
export { PipelineConfigSchema, QueueDefinitionSchema } from "./pipeline-config.js";
export type {
  DeadLetter,
  DeadLetterPage,
  DeadLetterSource,
  DeleteDestinationOptions,
  DeleteDestinationResult,
  DestinationInfo,
  DestinationStats,
  DurabilityCounters,
  PurgeDestinationResult,
  QueueAdminProtocol,
} from "./queue-admin.js";
export type { MessageValueSource } from "./queue-definition.js";
export { MAX_PRIORITY_LEVELS, readMessageValue, readPath } from "./queue-definition.js";
export type {
  QueueDefinitionChange,
  QueueDefinitionListener,
  QueueDefinitionStoreProtocol,
} from "./queue-definition-store.js";
export { mergeQueueDefinition, parseQueueDefinition, sameQueueDefinition } from "./queue-definition-store.js";
export type { ProviderHealth, PublishReceipt, QueueProtocol } from "./queue-protocol.js";
export { redactSecrets, redactUrl } from "./redact-url.js";
export { overrideInbound } from "./resolve-queues.js";
export type { RetryPolicy } from "./retry-policy.js";
export {
  DEFAULT_RETRY_POLICY,
  RETRY_POLICY_LIMITS,
  resolveRetryPolicy,
  retryDelayMs,
} from "./retry-policy.js";
export type { ConditionConfig } from "./route-condition.js";
export { evaluatePredicate, isAdapterCondition } from "./route-condition.js";
export { schemaIssueText } from "./schema-issue-text.js";
export type { DeliveryVerdict, SettledDelivery, SettlementListener } from "./settled-delivery.js";
export type { ArtefactSidecar, PutOptions, StorageProtocol } from "./storage-protocol.js";
export type { SubscribeOptions, Subscription } from "./subscribe-options.js";
export {
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_PREFETCH,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
} from "./subscribe-options.js";
export type {
  StartSpanOptions,
  TraceAttributes,
  TraceCarrier,
  TraceEnd,
  Tracer,
  TraceSpan,
} from "./tracing.js";
export { TraceAttribute } from "./tracing.js";
