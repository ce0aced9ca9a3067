export type { AdminDeps } from "./admin.js";
export { RabbitMqAdmin } from "./admin.js";
export { amqpReplyCode, classifyAmqpError } from "./classify-error.js";
export type { RabbitMqConfig, RabbitMqConfigInput } from "./config.js";
export { parseRabbitMqConfig, RabbitMqConfigSchema, redactUrl } from "./config.js";
export type { AmqpTarget } from "./naming.js";
export {
  deadLetterQueueName,
  escapeName,
  resolveDestination,
  retryQueueName,
  topicSubscriptionQueue,
} from "./naming.js";
export type { RabbitMqProvider, RabbitMqProviderOptions } from "./provider.js";
export { createRabbitMqProvider, RABBITMQ_CAPABILITIES } from "./provider.js";
