import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { HttpProblem } from "../http-errors.js";

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

function sameToken(given: string, expected: string): boolean {
  // Compare digests so the comparison takes the same time whatever the lengths.
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * With a token set, every mutating route (and, with `reads`, every route) needs
 * `Authorization: Bearer <token>`. The token is compared in constant time and never echoed.
 */
export function tokenGuard(token: string | undefined, options: { reads: boolean }): MiddlewareHandler {
  return async (c, next) => {
    if (token === undefined || (READ_METHODS.has(c.req.method) && !options.reads)) return next();
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
    await next();
  };
}
