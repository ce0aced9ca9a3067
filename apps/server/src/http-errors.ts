import { isDatabaseUnavailable } from "@factflow/lineage";
import { ConfigError, FactflowError, isFactflowError, ProviderError } from "@factflow/protocols";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";

/**
 * `Retry-After` (seconds) of every 503 (the database or the broker cannot be reached): long enough
 * not to hammer a service that is restarting, short enough that clients notice it is back.
 */
const RETRY_AFTER_SECONDS = 5;

/** The one error body every route returns. */
export interface ErrorBody {
  error: { code: string; message: string; issues?: readonly unknown[] };
}

/** An error raised by the HTTP layer itself (bad JSON, missing token, body too large...). */
export class HttpProblem extends Error {
  override readonly name = "HttpProblem";
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: string,
    message: string,
    readonly issues?: readonly unknown[],
  ) {
    super(message);
  }
}

/**
 * A dead-letter redrive refused because the execution that owns the queue is over: nothing consumes
 * its queues any more, so redriven messages would sit there unprocessed. Answered as 409
 * `execution_not_running`. (Not a `FactflowError`: its code is not in the protocols' code list.)
 */
export class ExecutionNotRunningError extends FactflowError {
  override readonly name: string = "ExecutionNotRunningError";
  constructor(
    readonly executionId: string,
    readonly status: string,
    message: string,
  ) {
    super("execution_not_running", message);
  }
}

/** HTTP status of each Factflow error code. Unlisted codes are server faults (500). */
const STATUS_BY_CODE: Partial<Record<FactflowError["code"], ContentfulStatusCode>> = {
  config_invalid: 422,
  unknown_adapter: 422,
  invalid_argument: 400,
  invalid_destination: 400,
  invalid_message: 400,
  storage_key_invalid: 400,
  message_too_large: 413,
  config_not_found: 404,
  execution_not_found: 404,
  not_found: 404,
  too_many_executions: 429,
  cancelled: 409,
  execution_not_running: 409,
  provider_closed: 503,
  provider_not_connected: 503,
};

function providerStatus(error: ProviderError): ContentfulStatusCode {
  switch (error.reason) {
    case "not-found":
      return 404;
    case "invalid-input":
      return 400;
    case "connection":
    case "timeout":
    case "closed":
      return 503;
    default:
      return 502;
  }
}

/** The header every 503 carries. */
export function retryAfter(): Record<string, string> {
  return { "Retry-After": String(RETRY_AFTER_SECONDS) };
}

/** An error answer: status, the one body, and headers it needs (`Retry-After`). */
export interface HttpErrorAnswer {
  status: ContentfulStatusCode;
  body: ErrorBody;
  headers?: Record<string, string>;
}

/** Maps any thrown value to a status and the one error body. The only place statuses are chosen. */
export function toHttpError(error: unknown): HttpErrorAnswer {
  // Whichever call hit it (a read, a create, a cancel), a database that cannot be reached right now
  // is the server's temporary state, not a fault in the request or the server: 503, retry later.
  if (isDatabaseUnavailable(error)) {
    return {
      status: 503,
      headers: retryAfter(),
      body: {
        error: {
          code: "database_unavailable",
          message: `[factflow/server] the database cannot be reached right now; retry in ${RETRY_AFTER_SECONDS} s (GET /readyz answers 200 once it is back)`,
        },
      },
    };
  }
  if (error instanceof HttpProblem) {
    const body: ErrorBody = { error: { code: error.code, message: error.message } };
    if (error.issues !== undefined) body.error.issues = error.issues;
    return error.status === 503
      ? { status: 503, body, headers: retryAfter() }
      : { status: error.status, body };
  }
  if (error instanceof HTTPException) {
    const status = error.status as ContentfulStatusCode;
    const code = status === 413 ? "payload_too_large" : status === 401 ? "unauthorized" : "http_error";
    return { status, body: { error: { code, message: error.message || "request failed" } } };
  }
  if (isFactflowError(error)) {
    const status =
      error instanceof ProviderError && error.code === "provider_error"
        ? providerStatus(error)
        : (STATUS_BY_CODE[error.code] ?? 500);
    const body: ErrorBody = { error: { code: error.code, message: error.message } };
    if (error instanceof ConfigError) body.error.issues = error.issues;
    return status === 503 ? { status, body, headers: retryAfter() } : { status, body };
  }
  return {
    status: 500,
    body: {
      error: {
        code: "internal",
        message: "[factflow/server] unexpected error; see the server log for details",
      },
    },
  };
}

/** What every request that reaches a stopping server is answered, whatever it asked. */
export function shuttingDownProblem(): HttpProblem {
  return new HttpProblem(
    503,
    "shutting_down",
    `[factflow/server] this server is shutting down; retry in ${RETRY_AFTER_SECONDS} s, or on another server of the cluster`,
  );
}

/**
 * Hono `onError` handler: logs server faults, answers with the one error shape. Once shutdown began,
 * a request that was already running when the store or the broker closed under it is answered
 * `shutting_down` (503), not as a fault: the client retries, nothing is logged as an error.
 */
export function errorHandler(
  log: (message: string, fields: Record<string, unknown>) => void,
  isShuttingDown: () => boolean = () => false,
) {
  return (error: Error, c: Context) => {
    const answer = toHttpError(error);
    const { status, body, headers } =
      answer.status >= 500 && isShuttingDown() ? toHttpError(shuttingDownProblem()) : answer;
    if (status >= 500 && body.error.code !== "shutting_down")
      log("request failed", {
        method: c.req.method,
        path: c.req.path,
        error: error.message,
        stack: error.stack,
      });
    return c.json(body, status, headers);
  };
}
