import type { FactflowRuntime } from "@factflow/runtime";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { crossSiteGuard } from "./guards/cross-site-guard.js";
import { hostGuard } from "./guards/host-guard.js";
import { requestTextGuard } from "./guards/request-text-guard.js";
import { tokenGuard } from "./guards/token-guard.js";
import { errorHandler, HttpProblem, retryAfter, shuttingDownProblem } from "./http-errors.js";
import { openApiDocument } from "./openapi.js";
import { configRoutes } from "./routes/configs.js";
import { deadLetterBulkRoutes } from "./routes/dead-letter-bulk.js";
import { executionRoutes } from "./routes/executions.js";
import { queueRoutes } from "./routes/queues.js";
import { searchRoutes } from "./routes/search.js";
import { systemRoutes } from "./routes/system.js";
import { uiRoutes } from "./routes/ui.js";

export interface AppOptions {
  /** True once shutdown began: readiness answers 503 so load balancers drain this instance. */
  isShuttingDown?: () => boolean;
  /** Where server faults are logged. @default console.error as JSON */
  log?: (message: string, fields: Record<string, unknown>) => void;
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The Hono app: `/healthz`, `/readyz`, `/metrics` and the JSON API under `/api/v1`. Every request
 * passes the Host check; API requests then pass the cross-site, token and path/query checks before
 * any route runs (docs/security.md).
 */
export function createApp(rt: FactflowRuntime, options: AppOptions = {}) {
  const log =
    options.log ??
    ((message, fields) => console.error(JSON.stringify({ level: "error", message, ...fields })));
  const app = new Hono();
  const shuttingDown = options.isShuttingDown ?? (() => false);
  app.onError(errorHandler(log, shuttingDown));
  app.notFound((c) =>
    c.json(
      {
        error: {
          code: "route_not_found",
          message: `no route ${c.req.method} ${c.req.path}; see GET /api/v1/openapi.json`,
        },
      },
      404,
    ),
  );

  app.use("*", hostGuard(rt.settings.host, rt.settings.allowed_hosts));
  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    if (shuttingDown()) return c.json({ status: "shutting_down" }, 503, retryAfter());
    const checks: Record<string, string> = {};
    await Promise.all([
      withTimeout(rt.provider.admin.listDestinations(), 2000, "provider")
        .then(() => {
          checks.provider = "ok";
        })
        .catch((error: Error) => {
          checks.provider = error.message;
        }),
      withTimeout(rt.executions.listExecutions({ limit: 1 }), 2000, "database")
        .then(() => {
          checks.database = "ok";
        })
        .catch((error: Error) => {
          checks.database = error.message;
        }),
    ]);
    const ready = Object.values(checks).every((v) => v === "ok");
    if (!ready) return c.json({ status: "not_ready", checks }, 503, retryAfter());
    // Ready, but say so when the provider worked around damage (e.g. unreadable journal records).
    const problems = rt.provider.health?.().problems ?? [];
    if (problems.length > 0) return c.json({ status: "degraded", checks, problems }, 200);
    return c.json({ status: "ready", checks }, 200);
  });
  app.get("/metrics", async (c) =>
    c.text(await rt.metrics.render(), 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" }),
  );

  // The web console (apps/console), same origin as the API it calls.
  app.route("/", uiRoutes());

  const api = new Hono();
  // The store and the broker are closing: no answer given now could be trusted.
  api.use("*", async (_c, next) => {
    if (shuttingDown()) throw shuttingDownProblem();
    await next();
  });
  api.use(
    "*",
    bodyLimit({
      maxSize: rt.settings.body_limit_bytes,
      onError: () => {
        throw new HttpProblem(
          413,
          "payload_too_large",
          `request body exceeds ${rt.settings.body_limit_bytes} bytes (FACTFLOW_BODY_LIMIT_BYTES)`,
        );
      },
    }),
  );
  api.use("*", tokenGuard(rt.settings.api_token, { reads: rt.settings.api_token_reads }));
  api.use("*", crossSiteGuard(rt.settings.allowed_origins));
  api.use("*", requestTextGuard());
  // Chained, so the routes' types reach `AppType` (for Hono's typed client, `hc<AppType>`).
  const routes = api
    .get("/openapi.json", (c) => c.json(openApiDocument()))
    .route("/", configRoutes(rt))
    .route("/", executionRoutes(rt))
    .route("/", queueRoutes(rt))
    .route("/", deadLetterBulkRoutes(rt))
    .route("/", searchRoutes(rt))
    .route("/", systemRoutes(rt));
  return app.route("/api/v1", routes);
}

/**
 * The app's type, for Hono's typed client: `hc<AppType>(url)`. A route module contributes its
 * request and response types when it builds its routes as one chain (`new Hono().get(...).post(...)`)
 * and returns the chain without widening it to `Hono`.
 */
export type AppType = ReturnType<typeof createApp>;
