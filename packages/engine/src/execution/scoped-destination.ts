import { PipelineError, parseDestination, QUEUE_PREFIX } from "@factflow/protocols";

/** An execution-scoped queue destination taken apart: whose it is, and the route's queue name. */
export interface ScopedDestination {
  /**
   * The first segment of the name: the execution's id (a UUIDv7) for every queue the engine scoped.
   * It is only a name here: check it against the execution store before trusting it, since a
   * scratch scope (e.g. the MQ diagnostic's) has the same layout.
   */
  readonly executionId: string;
  /** The queue name as the config wrote it (`parse.in`), without the `/queue/` prefix. */
  readonly queue: string;
}

/**
 * The broker destination of an execution's queue: `/queue/<executionId>/<queue>`. This is the one
 * place that layout is written; `ExecutionScopedQueue` scopes through it, and applications that need
 * the name of an execution's queue (stats, cleanup, dead letters) build it here rather than by hand.
 *
 * @param executionId the execution's id; any one segment of `[A-Za-z0-9_.:-]` is accepted, so a
 *   scratch scope can share the layout
 * @param queue the queue name as the config wrote it, without the `/queue/` prefix
 * @throws PipelineError (`invalid_argument`) when either part would not form a valid destination
 * @example scopedDestination("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", "parse.in")
 *   // "/queue/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/parse.in"
 */
export function scopedDestination(executionId: string, queue: string): string {
  if (executionId.length === 0 || executionId.includes("/")) {
    throw new PipelineError(
      "invalid_argument",
      `[factflow/engine] execution id ${JSON.stringify(executionId.slice(0, 80))} cannot scope a queue: it must be one non-empty name segment without "/"`,
    );
  }
  const destination = `${QUEUE_PREFIX}${executionId}/${queue}`;
  const parsed = parseDestination(destination);
  if ("error" in parsed) {
    throw new PipelineError(
      "invalid_argument",
      `[factflow/engine] cannot scope queue ${JSON.stringify(queue.slice(0, 200))} to execution ${executionId}: ${parsed.error}`,
    );
  }
  return destination;
}

/**
 * The inverse of {@link scopedDestination}: `{ executionId, queue }` for a valid destination of the
 * form `/queue/<executionId>/<queue>`, `undefined` for anything else — topics, unscoped queues
 * (`/queue/<name>`), and strings that are not valid destinations at all. It never throws.
 *
 * @example parseScopedDestination("/queue/0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/parse.in")
 *   // { executionId: "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", queue: "parse.in" }
 */
export function parseScopedDestination(destination: string): ScopedDestination | undefined {
  const parsed = parseDestination(destination);
  if ("error" in parsed || parsed.kind !== "queue") return undefined;
  // parseDestination guarantees non-empty segments, so a slash here splits two non-empty parts.
  const slash = parsed.name.indexOf("/");
  if (slash === -1) return undefined;
  return { executionId: parsed.name.slice(0, slash), queue: parsed.name.slice(slash + 1) };
}
