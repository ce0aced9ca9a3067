import {
  DEFAULT_LINEAGE_TREE_LIMIT,
  FactflowError,
  type JsonValue,
  MAX_LINEAGE_TREE_LIMIT,
} from "@factflow/protocols";
import { type FactflowRuntime, stallJson } from "@factflow/runtime";
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import * as v from "valibot";
import { PagingQuery, queryInt, readJson, readQuery } from "../http-input.js";
import { executionJson, inputJson, lineageJson, routeCountsJson } from "../serialize.js";
import type { RouteDoc } from "./route-doc.js";
import { jsonBody, queryParams } from "./typed-input.js";

const CreateExecutionBody = v.strictObject({
  config: v.pipe(v.string(), v.minLength(1, "name the config to run")),
  version: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(999_999_999))),
  input: v.optional(v.unknown()),
});

const ListQuery = v.object({
  status: v.optional(
    v.picklist(
      ["running", "completed", "failed", "cancelled"],
      "must be running, completed, failed or cancelled",
    ),
  ),
  config: v.optional(v.string()),
  parent: v.optional(v.string()),
  sort: v.optional(
    v.picklist(["started", "duration", "status"], "must be started, duration or status"),
    "started",
  ),
  order: v.optional(v.picklist(["asc", "desc"], "must be asc or desc"), "desc"),
  from: v.optional(v.pipe(v.string(), v.isoTimestamp("must be an ISO 8601 instant with a zone"))),
  to: v.optional(v.pipe(v.string(), v.isoTimestamp("must be an ISO 8601 instant with a zone"))),
  ...PagingQuery,
});

const LineageQuery = v.object({
  status: v.optional(
    v.picklist(
      ["pending", "initiated", "processing", "completed", "failed", "abandoned"],
      "is not a lineage status",
    ),
  ),
  route: v.optional(v.string()),
  kind: v.optional(v.picklist(["message", "adapter"], "must be message or adapter")),
  ...PagingQuery,
});

/** How many rows of a lineage tree to return: the ancestors' rows always, descendants up to the rest. */
const TreeQuery = v.object({ limit: queryInt(DEFAULT_LINEAGE_TREE_LIMIT, 1, MAX_LINEAGE_TREE_LIMIT) });

/** `?snapshot=true` adds the frozen config (read as is: anything else means false). */
const SnapshotQuery = v.object({ snapshot: v.optional(v.picklist(["true", "false"])) });
/** Where an SSE stream resumes when the `Last-Event-ID` header cannot be sent (read as is). */
const EventsQuery = v.object({ last_event_id: v.optional(v.pipe(v.string(), v.regex(/^\d+$/))) });

const ReplayBody = v.strictObject({
  from_route: v.pipe(v.string(), v.minLength(1, "name the route to replay from")),
  message_ids: v.optional(
    v.pipe(v.array(v.string()), v.minLength(1, "omit message_ids to replay every input")),
  ),
});

/** The routes below, for the OpenAPI document. */
export const EXECUTION_ROUTES: readonly RouteDoc[] = [
  {
    method: "post",
    path: "/executions",
    summary: "Start an execution; 429 when max_concurrent are running",
    tag: "executions",
    body: CreateExecutionBody,
    ok: 201,
  },
  { method: "get", path: "/executions", summary: "List executions", tag: "executions", query: ListQuery },
  {
    method: "get",
    path: "/executions/{id}",
    summary:
      "One execution with per-route counts (its input inline up to 64 KB) and `stall`: what it waits for when it has made no progress for stall_after_s, else null",
    tag: "executions",
    query: SnapshotQuery,
  },
  {
    method: "get",
    path: "/executions/{id}/input",
    summary: "The input an execution was started with, whole",
    tag: "executions",
  },
  {
    method: "post",
    path: "/executions/{id}/cancel",
    summary: "Cancel a running execution",
    tag: "executions",
  },
  {
    method: "post",
    path: "/executions/{id}/resume",
    summary:
      "Resume a running execution left behind by a stopped server (its messages are still on the broker)",
    tag: "executions",
  },
  {
    method: "get",
    path: "/executions/{id}/events",
    summary: "Server-Sent Events; reconnect with Last-Event-ID",
    tag: "executions",
    query: EventsQuery,
    sse: true,
  },
  {
    method: "get",
    path: "/executions/{id}/lineage",
    summary: "Lineage rows, paged and filtered",
    tag: "lineage",
    query: LineageQuery,
  },
  {
    method: "get",
    path: "/executions/{id}/lineage/{messageId}",
    summary:
      "The lineage tree of one message, at most `limit` rows (truncated says whether descendants were left out)",
    tag: "lineage",
    query: TreeQuery,
  },
  {
    method: "post",
    path: "/executions/{id}/replay",
    summary: "Replay a segment from a route as a new linked execution",
    tag: "replay",
    body: ReplayBody,
    ok: 201,
  },
];

/** How often an idle SSE stream sends a comment so proxies keep it open. */
const SSE_KEEPALIVE_MS = 15_000;

/**
 * Executions, their events (SSE), lineage and replay. One chain, returned as built, so its types
 * reach `AppType` (Hono's typed client).
 */
export function executionRoutes(rt: FactflowRuntime) {
  async function mustGet(id: string) {
    const record = await rt.executions.getExecution(id);
    if (record === undefined) {
      throw new FactflowError(
        "execution_not_found",
        `[factflow/server] execution "${id}" does not exist; list executions with GET /api/v1/executions`,
      );
    }
    return record;
  }

  return new Hono()
    .post("/executions", jsonBody(CreateExecutionBody), async (c) => {
      const body = await readJson(c, CreateExecutionBody);
      const resolved = await rt.configs.resolve(body.config, body.version);
      const record = await rt.engine.create({
        config: resolved.config,
        configName: resolved.name,
        configVersion: resolved.version,
        input: body.input === undefined ? null : (body.input as JsonValue),
        configPath: resolved.path,
      });
      return c.json({ id: record.id, status: record.status }, 201, {
        Location: `/api/v1/executions/${record.id}`,
      });
    })
    .get("/executions", queryParams(ListQuery), async (c) => {
      const q = readQuery(c, ListQuery);
      const page = await rt.executions.listExecutions({
        ...(q.status === undefined ? {} : { status: q.status }),
        ...(q.config === undefined ? {} : { configName: q.config }),
        ...(q.parent === undefined ? {} : { parentExecutionId: q.parent }),
        ...(q.from === undefined ? {} : { startedFrom: q.from }),
        ...(q.to === undefined ? {} : { startedTo: q.to }),
        sort: q.sort,
        direction: q.order,
        offset: q.offset,
        limit: q.limit,
        includeInput: false,
      });
      return c.json({
        total: page.total,
        offset: q.offset,
        limit: q.limit,
        items: page.items.map((r) => executionJson(r)),
      });
    })
    .get("/executions/:id", queryParams(SnapshotQuery), async (c) => {
      const record = await mustGet(c.req.param("id"));
      const counts = await rt.lineage.countsByRoute(record.id);
      const stall = record.status === "running" ? rt.engine.stall(record.id) : undefined;
      return c.json({
        ...executionJson(record, { snapshot: c.req.query("snapshot") === "true" }),
        ...inputJson(record),
        routes: routeCountsJson(counts),
        stall: stall === undefined ? null : stallJson(stall),
      });
    })
    .get("/executions/:id/input", async (c) => {
      const record = await mustGet(c.req.param("id"));
      return c.json({ id: record.id, input: record.input });
    })
    .post("/executions/:id/cancel", async (c) => {
      const record = await mustGet(c.req.param("id"));
      if (record.status !== "running")
        return c.json({ id: record.id, status: record.status, cancelled: false });
      const after = await rt.engine.cancel(record.id);
      return c.json({ id: after.id, status: after.status, cancelled: after.status === "cancelled" });
    })
    .post("/executions/:id/resume", async (c) => {
      const record = await mustGet(c.req.param("id"));
      if (record.status !== "running") {
        throw new FactflowError(
          "invalid_argument",
          `[factflow/server] execution "${record.id}" is ${record.status}; only a running execution left behind by a stopped server can be resumed`,
        );
      }
      const resumed = await rt.engine.resume(record.id);
      return c.json({ id: resumed.id, status: resumed.status });
    })
    .get("/executions/:id/events", async (c) => {
      const record = await mustGet(c.req.param("id"));
      const lastId = c.req.header("last-event-id") ?? c.req.query("last_event_id") ?? "0";
      const afterId = /^\d+$/.test(lastId) ? Number(lastId) : 0;
      return streamSSE(c, async (stream) => {
        const abort = new AbortController();
        stream.onAbort(() => abort.abort());
        const keepalive = setInterval(() => void stream.write(": keepalive\n\n"), SSE_KEEPALIVE_MS);
        try {
          for await (const event of rt.engine.events(record.id, { afterId, signal: abort.signal })) {
            await stream.writeSSE({
              id: String(event.id),
              event: event.type,
              data: JSON.stringify(event.data ?? null),
            });
          }
        } finally {
          clearInterval(keepalive);
        }
      });
    })
    .get("/executions/:id/lineage", queryParams(LineageQuery), async (c) => {
      const record = await mustGet(c.req.param("id"));
      const q = readQuery(c, LineageQuery);
      const page = await rt.lineage.rows(record.id, {
        ...(q.status === undefined ? {} : { status: q.status }),
        ...(q.route === undefined ? {} : { route: q.route }),
        ...(q.kind === undefined ? {} : { kind: q.kind }),
        offset: q.offset,
        limit: q.limit,
      });
      return c.json({
        total: page.total,
        offset: q.offset,
        limit: q.limit,
        items: page.items.map(lineageJson),
      });
    })
    .get("/executions/:id/lineage/:messageId", queryParams(TreeQuery), async (c) => {
      const record = await mustGet(c.req.param("id"));
      const messageId = c.req.param("messageId");
      const q = readQuery(c, TreeQuery);
      const tree = await rt.lineage.tree(record.id, messageId, { limit: q.limit });
      if (tree.items.length === 0) {
        throw new FactflowError(
          "not_found",
          `[factflow/server] message "${messageId}" has no lineage in execution "${record.id}"`,
        );
      }
      return c.json({
        execution_id: record.id,
        message_id: messageId,
        limit: q.limit,
        truncated: tree.truncated,
        items: tree.items.map(lineageJson),
      });
    })
    .post("/executions/:id/replay", jsonBody(ReplayBody), async (c) => {
      const record = await mustGet(c.req.param("id"));
      const body = await readJson(c, ReplayBody);
      if (!(body.from_route in record.configSnapshot.routes)) {
        const known = Object.keys(record.configSnapshot.routes).join(", ");
        throw new FactflowError(
          "invalid_argument",
          `[factflow/server] route "${body.from_route}" is not in execution "${record.id}"; its routes are: ${known}`,
        );
      }
      const replay = await rt.engine.replay(record.id, {
        fromRoute: body.from_route,
        ...(body.message_ids === undefined ? {} : { messageIds: body.message_ids }),
      });
      return c.json({ id: replay.id, status: replay.status, parent_execution_id: record.id }, 201, {
        Location: `/api/v1/executions/${replay.id}`,
      });
    });
}
