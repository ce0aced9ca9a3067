import type { MiddlewareHandler } from "hono";
import { HttpProblem } from "../http-errors.js";

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** Body types the API reads. None of them is a "simple" type, so a browser preflights them cross-site. */
const BODY_TYPES = new Set(["application/json", "application/yaml", "application/x-yaml", "text/yaml"]);

/**
 * Refuses what a web page could send on the user's behalf to a mutating route: an `Origin` other
 * than the server's own or an allowed one (403), a browser's cross-site fetch without `Origin`
 * (403), and bodies of any type but JSON or YAML (415) — the types a form or a no-preflight
 * `fetch` can send (`text/plain`, form encodings) are exactly the ones refused.
 */
export function crossSiteGuard(allowedOrigins: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    if (!MUTATING.has(c.req.method)) return next();
    const url = new URL(c.req.url);
    const origin = c.req.header("origin");
    if (origin !== undefined) {
      const own = `${url.protocol}//${url.host}`.toLowerCase();
      const given = origin.toLowerCase().replace(/\/+$/, "");
      if (given !== own && !allowedOrigins.includes(given)) {
        throw new HttpProblem(
          403,
          "origin_not_allowed",
          `requests from origin "${origin.slice(0, 100)}" may not change anything here; add it to FACTFLOW_ALLOWED_ORIGINS if it is yours`,
        );
      }
    } else if (c.req.header("sec-fetch-site") === "cross-site") {
      throw new HttpProblem(403, "origin_not_allowed", "cross-site requests may not change anything here");
    }
    if (hasBody(c.req.raw)) {
      const type = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
      if (!BODY_TYPES.has(type)) {
        throw new HttpProblem(
          415,
          "unsupported_media_type",
          `a request body of type "${type.slice(0, 100) || "(none)"}" is not accepted; send Content-Type: application/json (or application/yaml for pipeline YAML)`,
        );
      }
    }
    await next();
  };
}

/** A declared type counts as a body too, so `text/plain` is refused even when empty. */
function hasBody(request: Request): boolean {
  const { headers } = request;
  const length = headers.get("content-length");
  return (
    (length !== null && length !== "0") || headers.has("transfer-encoding") || headers.has("content-type")
  );
}
