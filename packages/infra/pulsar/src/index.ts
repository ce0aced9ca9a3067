export type { AdminDeps } from "./admin.js";
export { PulsarAdmin } from "./admin.js";
export type { DecodedPayload, EncodedMessage } from "./codec.js";
export { decodeMessage, encodeMessage } from "./codec.js";
export type { PulsarConfig, PulsarConfigInput } from "./config.js";
export { adminUrlOf, PulsarConfigSchema, parsePulsarConfig } from "./config.js";
export type { PulsarRoute, PulsarTarget } from "./naming.js";
export {
  DEAD_LETTER_SUBSCRIPTION,
  escapeName,
  escapeSubscription,
  QUEUE_SUBSCRIPTION,
  queueDeadLetterTopic,
  resolveDestination,
  routeOf,
} from "./naming.js";
export type { PulsarProvider, PulsarProviderOptions } from "./provider.js";
export { createPulsarProvider, PULSAR_CAPABILITIES } from "./provider.js";
export type {
  CloseCause,
  ConsumerLink,
  ConsumerOptions,
  IncomingMessage,
  OutgoingMessage,
  ProducerLink,
  PulsarTransport,
} from "./transport.js";
export type { WsTransportOptions } from "./ws-transport.js";
export { WsTransport } from "./ws-transport.js";
