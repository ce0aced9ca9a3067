import { isUuid } from "@factflow/lineage";
import type { FactflowRuntime } from "@factflow/runtime";
import { Hono } from "hono";
import * as v from "valibot";
import { queryInt, readQuery } from "../http-input.js";
import { executionJson } from "../serialize.js";
import type { RouteDoc } from "./route-doc.js";
import { queryParams } from "./typed-input.js";

/** How many of the newest executions a search looks into for a message id, unless told otherwise. */
const DEFAULT_SCAN = 200;
const MAX_SCAN = 5000;
/** Message lookups in flight at once (each is one index lookup). */
const PARALLEL = 8;

const SearchQuery = v.object({
  id: v.pipe(v.string(), v.trim(), v.minLength(1, "give the id to look for"), v.maxLength(512)),
  scan: queryInt(DEFAULT_SCAN, 1, MAX_SCAN),
});

export const SEARCH_ROUTES: readonly RouteDoc[] = [
  {
    method: "get",
    path: "/search",
    summary:
      "Find an id: an execution with that id, and the messages with that id (a message id, or a correlation id: the id of the message that started its chain) in the newest `scan` executions, with the replays of each execution found",
    tag: "search",
    query: SearchQuery,
  },
];

interface MessageHit {
  execution_id: string;
  config_name: string;
  execution_status: string;
  created_at: string;
  message_id: string;
  status: string;
  attempt: number;
}

/**
 * `GET /search?id=`: one box for the ids an operator has at hand (from a log line, a dead letter, a
 * trace). An execution is found by its id directly; a message by looking its id up in each of the
 * newest executions (one index lookup each, newest first), since lineage is stored per execution.
 */
export function searchRoutes(rt: FactflowRuntime) {
  return new Hono().get("/search", queryParams(SearchQuery), async (c) => {
    const q = readQuery(c, SearchQuery);
    const execution = isUuid(q.id) ? await rt.executions.getExecution(q.id) : undefined;
    // A lineage store without message lookups (the method is optional) still answers for executions.
    const lookup = rt.lineage.messageStatus?.bind(rt.lineage);
    const newest = [];
    let total = 0;
    for (let offset = 0; lookup !== undefined && offset < q.scan; offset += 500) {
      const page = await rt.executions.listExecutions({
        offset,
        limit: Math.min(500, q.scan - offset),
        includeInput: false,
      });
      total = page.total;
      newest.push(...page.items);
      if (page.items.length === 0 || offset + page.items.length >= total) break;
    }
    const messages: MessageHit[] = [];
    for (let i = 0; i < newest.length; i += PARALLEL) {
      const slice = newest.slice(i, i + PARALLEL);
      const found = await Promise.all(slice.map((record) => lookup?.(record.id, q.id)));
      slice.forEach((record, j) => {
        const hit = found[j];
        if (hit === undefined) return;
        messages.push({
          execution_id: record.id,
          config_name: record.configName,
          execution_status: record.status,
          created_at: record.createdAt,
          message_id: q.id,
          status: hit.status,
          attempt: hit.attempt,
        });
      });
    }
    // Replays carry the correlation ids of the execution they replay: list them with each hit.
    const parents = [...new Set(messages.map((m) => m.execution_id))].slice(0, 20);
    const replays = (
      await Promise.all(
        parents.map((parent) =>
          rt.executions.listExecutions({ parentExecutionId: parent, limit: 50, includeInput: false }),
        ),
      )
    ).flatMap((page) => page.items.map((r) => executionJson(r)));
    return c.json({
      id: q.id,
      execution: execution === undefined ? null : executionJson(execution),
      messages,
      replays,
      scanned: newest.length,
      executions_total: total,
      complete: lookup !== undefined && newest.length >= total,
    });
  });
}
