import { isIP } from "node:net";
import type { MiddlewareHandler } from "hono";
import { HttpProblem } from "../http-errors.js";

/** True for names and addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  return name === "localhost" || name === "::1" || /^127\.\d+\.\d+\.\d+$/.test(name);
}

/** Whether a request's host name is one this server answers to. */
export function isAllowedHost(hostname: string, boundHost: string, allowed: readonly string[]): boolean {
  const name = hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  // A rebinding attack needs a name the attacker's DNS controls: IP literals and loopback names are safe.
  if (isIP(name) !== 0 || name === "localhost" || name.endsWith(".localhost")) return true;
  if (name === boundHost.toLowerCase()) return true;
  return allowed.some((entry) => (entry.startsWith("*.") ? name.endsWith(entry.slice(1)) : name === entry));
}

/**
 * Answers 421 to a request whose `Host` is not this server's: a page on a name the attacker controls
 * that re-resolves to 127.0.0.1 (DNS rebinding) can then neither read nor write the API.
 */
export function hostGuard(boundHost: string, allowed: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    const hostname = new URL(c.req.url).hostname;
    if (!isAllowedHost(hostname, boundHost, allowed)) {
      throw new HttpProblem(
        421,
        "host_not_allowed",
        `this server does not answer to host "${hostname.slice(0, 100)}"; add it to FACTFLOW_ALLOWED_HOSTS if it is yours`,
      );
    }
    await next();
  };
}
