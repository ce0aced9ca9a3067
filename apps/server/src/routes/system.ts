import type { PipelineConfig } from "@factflow/protocols";
import { Hono } from "hono";
import * as v from "valibot";
import { readJson } from "../http-input.js";
import { diagnosticLine, runMqDiagnostic } from "../mq-diagnostic.js";
import type { FactflowRuntime } from "../runtime.js";
import { redactSettings } from "../settings.js";

const RetentionBody = v.strictObject({
  older_than_days: v.pipe(
    v.number("must be a number of days"),
    v.finite("must be a finite number"),
    v.minValue(0, "must be at least 0 (0 deletes every finished execution)"),
  ),
});

/** System endpoints under /api/v1/system. */
export function systemRoutes(rt: FactflowRuntime): Hono {
  const app = new Hono();

  app.get("/system/info", (c) =>
    c.json({
      provider: rt.provider.name,
      capabilities: rt.provider.capabilities,
      executions_running: rt.engine.active(),
      provider_problems: rt.provider.health?.().problems ?? [],
      settings: redactSettings(rt.settings),
    }),
  );

  app.post("/system/mq-diagnostic", async (c) => {
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
  });

  // On-demand retention: the same job the FACTFLOW_RETENTION_DAYS schedule runs (never overlapping).
  app.post("/system/retention", async (c) => {
    const body = await readJson(c, RetentionBody);
    const result = await rt.retention.run(body.older_than_days, "request");
    return c.json({
      older_than_days: result.olderThanDays,
      before: result.before,
      deleted: result.deleted,
      duration_ms: result.durationMs,
      scheduled_retention_days: rt.settings.retention_days,
    });
  });

  return app;
}
