export { classifyError } from "./classify-error.js";
export type { EmbeddedConfig, EmbeddedConfigInput } from "./config.js";
export { EmbeddedConfigSchema, parseEmbeddedConfig } from "./config.js";
export type { CorruptTail, DamagedLog } from "./log-store.js";
export type { EmbeddedProvider, EmbeddedProviderOptions, EmbeddedStoreStats } from "./provider.js";
export { createEmbeddedProvider } from "./provider.js";
export type { QueueDefinition } from "./queue-options.js";
export { QueueDefinitionSchema } from "./queue-options.js";
