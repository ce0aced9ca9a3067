import { findJsonHazard } from "@factflow/protocols";
import type { MiddlewareHandler } from "hono";
import { HttpProblem } from "../http-errors.js";

/**
 * Refuses paths and query parameters that no id, name or filter can hold: malformed percent
 * encoding, NUL characters and lone surrogates (400 naming the part), before any route or database
 * sees them.
 */
export function requestTextGuard(): MiddlewareHandler {
  return async (c, next) => {
    const url = new URL(c.req.url);
    let path: string;
    try {
      path = decodeURIComponent(url.pathname);
    } catch {
      throw new HttpProblem(400, "invalid_request", "the path has malformed percent-encoding");
    }
    const pathHazard = findJsonHazard(path);
    if (pathHazard !== undefined)
      throw new HttpProblem(400, "invalid_request", `the path ${pathHazard.message}`);
    for (const pair of url.search.slice(1).split("&")) {
      if (pair === "") continue;
      const eq = pair.indexOf("=");
      const rawName = eq === -1 ? pair : pair.slice(0, eq);
      const rawValue = eq === -1 ? "" : pair.slice(eq + 1);
      let name: string;
      let value: string;
      try {
        name = decodeURIComponent(rawName.replace(/\+/g, " "));
        value = decodeURIComponent(rawValue.replace(/\+/g, " "));
      } catch {
        throw new HttpProblem(400, "invalid_request", "the query has malformed percent-encoding");
      }
      const hazard = findJsonHazard([name, value]);
      if (hazard !== undefined)
        throw new HttpProblem(
          400,
          "invalid_request",
          `query parameter "${name.slice(0, 40)}" ${hazard.message}`,
        );
    }
    await next();
  };
}
