export { RedisAdmin } from "./admin.js";
export { classifyRedisError } from "./classify-error.js";
export type { RedisConfig, RedisConfigInput } from "./config.js";
export { parseRedisConfig, RedisConfigSchema, redactUrl } from "./config.js";
export type { LaneKeys } from "./naming.js";
export { escapeSubscription, laneFor } from "./naming.js";
export type { RedisProvider, RedisProviderOptions } from "./provider.js";
export { createRedisProvider, REDIS_CAPABILITIES, redisKeyOf } from "./provider.js";
