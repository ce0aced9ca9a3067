export { brokerUrl, positiveInt } from "./config-fields.js";
export { emptyDurabilityCounters } from "./counters.js";
export type { DeadLetterFallbacks } from "./dead-letter.js";
export { deadLetterFromHeaders } from "./dead-letter.js";
export type { DistinctDeadLetters } from "./dead-letter-identity.js";
export { deadLetterKey, distinctDeadLetters } from "./dead-letter-identity.js";
export type { Expiring } from "./deadline-sweep.js";
export { DeadlineSweep, HandlerRun } from "./deadline-sweep.js";
export { destinationMemo } from "./destination-memo.js";
export type { EnvelopeFallbacks } from "./envelope-headers.js";
export { compactHeaders, envelopeFromHeaders } from "./envelope-headers.js";
export type { DeadLetterOrigin } from "./failure-headers.js";
export { deadLetterHeaders, redriveHeaders, retryHeaders } from "./failure-headers.js";
export type { GroupKeySpec } from "./group-key.js";
export { groupKeyOf, hasGroupKey, NO_GROUP_KEY } from "./group-key.js";
export type { GroupedSubscription } from "./group-lanes.js";
export { GROUP_LANE_WINDOW, groupedSubscription } from "./group-lanes.js";
export type { GuardOptions, UnguardedProvider } from "./guard.js";
export { guardProvider } from "./guard.js";
export type { HandlerRunsOptions, RunWatcher } from "./handler-runs.js";
export { HandlerRuns, once } from "./handler-runs.js";
export { KnownDestinations } from "./known-destinations.js";
export type { NativeErrorMeaning } from "./native-error.js";
export { networkErrorCode } from "./native-error.js";
export type { PreparedOutbound, PrepareOutboundOptions } from "./outbound.js";
export {
  checkDestination,
  invalidInputError,
  PUBLISHED_AT_HEADER,
  parseAttempt,
  prepareOutbound,
} from "./outbound.js";
export { parseProviderConfig } from "./parse-config.js";
export { providerLogger } from "./provider-logger.js";
export type { HandlerOutcome, SettlementContext, SettlementVerdict } from "./settlement.js";
export { decideSettlement, MAX_LAST_ERROR_LENGTH, runHandler } from "./settlement.js";
export type { ReportedSubscription, SettledIdentity } from "./settlement-report.js";
export {
  COPY_FAILURE_PAUSE_MS,
  pauseAfterCopyFailure,
  SettlementReport,
  settleWithin,
  undecodableVerdict,
} from "./settlement-report.js";
export { SignalPool } from "./signal-pool.js";
export type {
  ResolvedSubscribeOptions,
  SubscribeCapabilities,
  SubscribeContext,
} from "./subscribe-options.js";
export {
  RetryOptionsSchema,
  resolveSubscribeOptions,
  SubscribeFieldsSchema,
  SubscribeOptionsSchema,
} from "./subscribe-options.js";
export type {
  CopyOutcome,
  DecodedDelivery,
  HandBackCause,
  SettlementCopy,
  SubscriptionPort,
  UndecodableDelivery,
} from "./subscription-port.js";
export type { SubscriptionRuntimeOptions } from "./subscription-runtime.js";
export { SubscriptionRuntime } from "./subscription-runtime.js";
export type { Corkable } from "./turn-cork.js";
export { TurnCork } from "./turn-cork.js";
