export type { FetchLike, SseEvent } from "./api-client.js";
export { ApiClient, ApiError, parseSse } from "./api-client.js";
export { main, USAGE } from "./cli.js";
export type { Output } from "./output.js";
export type { ExecutionSummary, RouteSummary } from "./summary.js";
export { renderSummary, summarize } from "./summary.js";
