/**
 * The OpenAPI 3.1 document of the HTTP API, written by hand from a compact table. A test checks
 * that every route the app registers is listed here.
 */

type Method = "get" | "post";

interface Operation {
  readonly method: Method;
  readonly path: string;
  readonly summary: string;
  readonly tag: string;
  readonly query?: readonly string[];
  readonly body?: Record<string, unknown>;
  readonly ok?: number;
  readonly sse?: boolean;
  readonly text?: boolean;
}

const obj = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: "object",
  properties,
  required,
});
const str = { type: "string" };
const int = { type: "integer" };
const oneLetter = obj({ destination: str, subscription: str, message_id: str }, [
  "destination",
  "message_id",
]);

const force = {
  type: "boolean",
  description:
    "Redrive even though the execution owning the queue is not running (nothing will consume it unless you do)",
};
const redrive = obj({ destination: str, subscription: str, force }, ["destination"]);
const redriveOne = obj({ destination: str, subscription: str, message_id: str, force }, [
  "destination",
  "message_id",
]);

/** Every route of the app. `{x}` marks a path parameter. */
export const OPERATIONS: readonly Operation[] = [
  { method: "get", path: "/healthz", summary: "Liveness: the process answers", tag: "system" },
  { method: "get", path: "/readyz", summary: "Readiness: provider and database answer", tag: "system" },
  { method: "get", path: "/metrics", summary: "Prometheus metrics", tag: "system", text: true },
  { method: "get", path: "/api/v1/openapi.json", summary: "This document", tag: "system" },
  {
    method: "get",
    path: "/api/v1/system/info",
    summary: "Provider, capabilities and redacted settings",
    tag: "system",
  },
  {
    method: "post",
    path: "/api/v1/system/mq-diagnostic",
    summary:
      "Publish + consume round trip on a scratch copy of every route queue of every config (one line per route)",
    tag: "system",
  },
  {
    method: "post",
    path: "/api/v1/system/retention",
    summary:
      "Delete finished executions (with their lineage) that finished more than older_than_days days ago; running ones are kept. The same job FACTFLOW_RETENTION_DAYS runs hourly",
    tag: "system",
    body: obj({ older_than_days: { type: "number", minimum: 0 } }, ["older_than_days"]),
  },
  {
    method: "get",
    path: "/api/v1/configs",
    summary: "List configs (config directory + uploaded versions)",
    tag: "configs",
  },
  {
    method: "post",
    path: "/api/v1/configs/validate",
    summary: "Validate pipeline YAML; every issue with its YAML path",
    tag: "configs",
    body: obj({ source: str }, ["source"]),
  },
  {
    method: "get",
    path: "/api/v1/configs/{name}",
    summary: "Get a config (latest, or ?version=N)",
    tag: "configs",
    query: ["version"],
  },
  {
    method: "post",
    path: "/api/v1/configs/{name}/versions",
    summary: "Upload a new version (YAML body or {source})",
    tag: "configs",
    body: obj({ source: str }, ["source"]),
    ok: 201,
  },
  {
    method: "post",
    path: "/api/v1/executions",
    summary: "Start an execution; 429 when max_concurrent are running",
    tag: "executions",
    body: obj({ config: str, version: int, input: {} }, ["config"]),
    ok: 201,
  },
  {
    method: "get",
    path: "/api/v1/executions",
    summary: "List executions",
    tag: "executions",
    query: ["status", "config", "parent", "offset", "limit"],
  },
  {
    method: "get",
    path: "/api/v1/executions/{id}",
    summary: "One execution with per-route counts (its input inline up to 64 KB)",
    tag: "executions",
    query: ["snapshot"],
  },
  {
    method: "get",
    path: "/api/v1/executions/{id}/input",
    summary: "The input an execution was started with, whole",
    tag: "executions",
  },
  {
    method: "post",
    path: "/api/v1/executions/{id}/cancel",
    summary: "Cancel a running execution",
    tag: "executions",
  },
  {
    method: "post",
    path: "/api/v1/executions/{id}/resume",
    summary:
      "Resume a running execution left behind by a stopped server (its messages are still on the broker)",
    tag: "executions",
  },
  {
    method: "get",
    path: "/api/v1/executions/{id}/events",
    summary: "Server-Sent Events; reconnect with Last-Event-ID",
    tag: "executions",
    query: ["last_event_id"],
    sse: true,
  },
  {
    method: "get",
    path: "/api/v1/executions/{id}/lineage",
    summary: "Lineage rows, paged and filtered",
    tag: "lineage",
    query: ["status", "route", "kind", "offset", "limit"],
  },
  {
    method: "get",
    path: "/api/v1/executions/{id}/lineage/{messageId}",
    summary: "The lineage tree of one message",
    tag: "lineage",
  },
  {
    method: "post",
    path: "/api/v1/executions/{id}/replay",
    summary: "Replay a segment from a route as a new linked execution",
    tag: "replay",
    body: obj({ from_route: str, message_ids: { type: "array", items: str } }, ["from_route"]),
    ok: 201,
  },
  { method: "get", path: "/api/v1/queues", summary: "Queues and topics of the provider", tag: "queues" },
  {
    method: "get",
    path: "/api/v1/queues/counters",
    summary:
      "Durability counters since start: the provider's (published, confirmed, acked, retried, deadLettered, redelivered, superseded, lost) and lineage's (written, retriedWrites, lost, queued)",
    tag: "queues",
  },
  {
    method: "get",
    path: "/api/v1/queues/stats",
    summary: "Depth, consumers, in flight, DLQ depth",
    tag: "queues",
    query: ["destination", "subscription"],
  },
  {
    method: "get",
    path: "/api/v1/queues/dlq",
    summary: "Browse dead letters (offset/limit)",
    tag: "queues",
    query: ["destination", "subscription", "offset", "limit"],
  },
  {
    method: "post",
    path: "/api/v1/queues/dlq/redrive",
    summary:
      "Redrive every dead letter. 409 execution_not_running when the queue's execution (/queue/<execution_id>/...) is over: use POST /executions/{id}/replay, or force: true",
    tag: "queues",
    body: redrive,
  },
  {
    method: "post",
    path: "/api/v1/queues/dlq/redrive-one",
    summary:
      "Redrive one dead letter. 409 execution_not_running when the queue's execution is over (see redrive)",
    tag: "queues",
    body: redriveOne,
  },
  {
    method: "post",
    path: "/api/v1/queues/dlq/discard",
    summary: "Discard one dead letter",
    tag: "queues",
    body: oneLetter,
  },
  {
    method: "post",
    path: "/api/v1/queues/delete",
    summary: "Delete a queue or subscription (dead letters kept unless keep_dead_letters is false)",
    tag: "queues",
    body: obj(
      {
        destination: str,
        subscription: str,
        if_empty: { type: "boolean" },
        keep_dead_letters: { type: "boolean" },
      },
      ["destination"],
    ),
  },
];

const errorResponse = {
  description: "Error",
  content: {
    "application/json": {
      schema: obj(
        {
          error: obj({ code: str, message: str, issues: { type: "array", items: {} } }, ["code", "message"]),
        },
        ["error"],
      ),
    },
  },
};

/** Builds the OpenAPI document. */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const params = [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: str,
    }));
    for (const q of op.query ?? [])
      params.push({ name: q, in: "query", required: q === "destination", schema: str });
    const content = op.sse
      ? { "text/event-stream": { schema: str } }
      : op.text
        ? { "text/plain": { schema: str } }
        : { "application/json": { schema: { type: "object" } } };
    const operation: Record<string, unknown> = {
      summary: op.summary,
      tags: [op.tag],
      parameters: params,
      responses: {
        [String(op.ok ?? 200)]: { description: "OK", content },
        "4XX": errorResponse,
        "5XX": errorResponse,
      },
    };
    if (op.body !== undefined)
      operation.requestBody = { required: true, content: { "application/json": { schema: op.body } } };
    if (op.method === "post") operation.security = [{ bearer: [] }, {}];
    const entry = paths[op.path] ?? {};
    entry[op.method] = operation;
    paths[op.path] = entry;
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Factflow API",
      version: "0.1.0",
      description:
        "Every mutating route requires `Authorization: Bearer <FACTFLOW_API_TOKEN>` when a token is configured.",
    },
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    paths,
  };
}
