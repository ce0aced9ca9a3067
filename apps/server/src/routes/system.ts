import type { PipelineConfig } from "@factflow/protocols";
import { type FactflowRuntime, redactSettings } from "@factflow/runtime";
import { Hono } from "hono";
import * as v from "valibot";
import { readJson } from "../http-input.js";
import { diagnosticLine, runMqDiagnostic } from "../mq-diagnostic.js";
import type { RouteDoc } from "./route-doc.js";
import { jsonBody } from "./typed-input.js";

const RetentionBody = v.strictObject({
  older_than_days: v.pipe(
    v.number("must be a number of days"),
    v.finite("must be a finite number"),
    v.minValue(0, "must be at least 0 (0 deletes every finished execution)"),
  ),
});

/** The routes below, for the OpenAPI document. */
export const SYSTEM_ROUTES: readonly RouteDoc[] = [
  {
    method: "get",
    path: "/system/info",
    summary: "Provider, capabilities and redacted settings",
    tag: "system",
  },
  {
    method: "post",
    path: "/system/mq-diagnostic",
    summary:
      "Publish + consume round trip on a scratch copy of every route queue of every config (one line per route)",
    tag: "system",
  },
  {
    method: "post",
    path: "/system/retention",
    summary:
      "Delete finished executions (with their lineage) that finished more than older_than_days days ago; running ones are kept. The same job FACTFLOW_RETENTION_DAYS runs hourly",
    tag: "system",
    body: RetentionBody,
  },
];

/**
 * System endpoints under /api/v1/system. One chain, returned as built, so its types reach `AppType`
 * (Hono's typed client).
 */
export function systemRoutes(rt: FactflowRuntime) {
  return (
    new Hono()
      .get("/system/info", (c) =>
        c.json({
          provider: rt.provider.name,
          capabilities: rt.provider.capabilities,
          executions_running: rt.engine.active(),
          executions_running_here: rt.engine.runningHere(),
          provider_problems: rt.provider.health?.().problems ?? [],
          settings: redactSettings(rt.settings),
        }),
      )
      .post("/system/mq-diagnostic", async (c) => {
        const configs: PipelineConfig[] = [];
        for (const entry of await rt.configs.list()) {
          configs.push((await rt.configs.resolve(entry.name)).config);
        }
        const results = await runMqDiagnostic(rt.provider, configs);
        const ok = results.every((r) => r.ok);
        return c.json(
          { ok, provider: rt.provider.name, lines: results.map(diagnosticLine), results },
          ok ? 200 : 503,
        );
      })
      // On-demand retention: the same job the FACTFLOW_RETENTION_DAYS schedule runs (never overlapping).
      .post("/system/retention", jsonBody(RetentionBody), async (c) => {
        const body = await readJson(c, RetentionBody);
        const result = await rt.retention.run(body.older_than_days, "request");
        return c.json({
          older_than_days: result.olderThanDays,
          before: result.before,
          deleted: result.deleted,
          duration_ms: result.durationMs,
          scheduled_retention_days: rt.settings.retention_days,
        });
      })
  );
}
