import type { PipelineConfig } from "@factflow/protocols";
import { Hono } from "hono";
import { diagnosticLine, runMqDiagnostic } from "../mq-diagnostic.js";
import type { FactflowRuntime } from "../runtime.js";
import { redactSettings } from "../settings.js";

/** System endpoints under /api/v1/system. */
export function systemRoutes(rt: FactflowRuntime): Hono {
  const app = new Hono();

  app.get("/system/info", (c) =>
    c.json({
      provider: rt.provider.name,
      capabilities: rt.provider.capabilities,
      executions_running: rt.engine.active(),
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

  return app;
}
