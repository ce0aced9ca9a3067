export type { AdminDeps } from "./admin.js";
export { ArtemisAdmin } from "./admin.js";
export { artemisCode, classifyArtemisError } from "./classify-error.js";
export type { ArtemisConfig, ArtemisConfigInput, ArtemisEndpoint } from "./config.js";
export {
  ArtemisConfigSchema,
  DEFAULT_ARTEMIS_URL,
  endpointOf,
  parseArtemisConfig,
  redactConfig,
  redactUrl,
} from "./config.js";
export type { ArtemisTarget } from "./naming.js";
export {
  consumedQueueName,
  deadLetterQueueName,
  resolveDestination,
  subscribeDestination,
  subscriptionQueueName,
} from "./naming.js";
export type { ArtemisProvider, ArtemisProviderOptions } from "./provider.js";
export { ARTEMIS_CAPABILITIES, createArtemisProvider } from "./provider.js";
export type { DeliveryTicket, SettlementChecks, SupersededBy } from "./settlement-guard.js";
export { ALL_CHECKS, SettlementGuard } from "./settlement-guard.js";
export { subscribeHeaders } from "./subscribe-headers.js";
export { ArtemisSubscription } from "./subscription.js";
export {
  assertIsoTimestampHeader,
  isoTimestamp,
  isStrictIsoTimestamp,
  SUBSCRIBED_AT_HEADER,
} from "./timestamp.js";
