import { createHash, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { errorHandler, HttpProblem } from "./http-errors.js";
import { openApiDocument } from "./openapi.js";
import { configRoutes } from "./routes/configs.js";
import { executionRoutes } from "./routes/executions.js";
import { queueRoutes } from "./routes/queues.js";
import { systemRoutes } from "./routes/system.js";
import type { FactflowRuntime } from "./runtime.js";

export interface AppOptions {
  /** True once shutdown began: readiness answers 503 so load balancers drain this instance. */
  isShuttingDown?: () => boolean;
  /** Where server faults are logged. @default console.error as JSON */
  log?: (message: string, fields: Record<string, unknown>) => void;
}

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

function sameToken(given: string, expected: string): boolean {
  // Compare digests so the comparison takes the same time whatever the lengths.
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
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

/** The Hono app: `/healthz`, `/readyz`, `/metrics` and the JSON API under `/api/v1`. */
export function createApp(rt: FactflowRuntime, options: AppOptions = {}): Hono {
  const log =
    options.log ??
    ((message, fields) => console.error(JSON.stringify({ level: "error", message, ...fields })));
  const app = new Hono();
  app.onError(errorHandler(log));
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

  app.get("/healthz", (c) => c.json({ status: "ok" }));
  app.get("/readyz", async (c) => {
    if (options.isShuttingDown?.() === true) return c.json({ status: "shutting_down" }, 503);
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
    return c.json({ status: ready ? "ready" : "not_ready", checks }, ready ? 200 : 503);
  });
  app.get("/metrics", (c) =>
    c.text(rt.metrics.render(), 200, { "Content-Type": "text/plain; version=0.0.4; charset=utf-8" }),
  );

  const api = new Hono();
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
  api.use("*", async (c, next) => {
    const token = rt.settings.api_token;
    if (token !== undefined && !READ_METHODS.has(c.req.method)) {
      const header = c.req.header("authorization") ?? "";
      const given = header.startsWith("Bearer ") ? header.slice("Bearer ".length) : undefined;
      if (given === undefined || !sameToken(given, token)) {
        c.header("WWW-Authenticate", 'Bearer realm="factflow"');
        throw new HttpProblem(
          401,
          "unauthorized",
          "this route needs `Authorization: Bearer <token>` with the server's FACTFLOW_API_TOKEN",
        );
      }
    }
    await next();
  });
  api.get("/openapi.json", (c) => c.json(openApiDocument()));
  api.route("/", configRoutes(rt));
  api.route("/", executionRoutes(rt));
  api.route("/", queueRoutes(rt));
  api.route("/", systemRoutes(rt));
  app.route("/api/v1", api);
  return app;
}
