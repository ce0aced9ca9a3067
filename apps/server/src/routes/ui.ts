import { readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, extname, join, resolve, sep } from "node:path";
import { Hono, type MiddlewareHandler } from "hono";

/** Content types of the files a Vite build writes. */
const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json; charset=utf-8",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * Same origin only: scripts, styles and API calls come from this server, nothing is framed, no
 * form posts anywhere, and no inline script can run even if some text slipped into the page.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** The built console (`apps/console/dist`), or undefined when the package is not installed. */
export function defaultConsoleDir(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    const manifest = require.resolve("@factflow/console/package.json");
    return join(dirname(manifest), "dist");
  } catch {
    return undefined;
  }
}

function securityHeaders(type: string, cache: string): Record<string, string> {
  return {
    "Content-Type": type,
    "Cache-Control": cache,
    "Content-Security-Policy": CONSOLE_CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
  };
}

/**
 * Serves the web console at `/ui/` from its build output. File names under `assets/` carry a
 * content hash, so they are cached for a year; `index.html` is revalidated on every load so a new
 * build shows at once. Routes live in the URL fragment, so any other path is a 404.
 */
export function uiRoutes(consoleDir: string | undefined = defaultConsoleDir()): Hono {
  const app = new Hono();
  const root = consoleDir === undefined ? undefined : resolve(consoleDir);
  // Static files, like Hono's serveStatic, are middleware: they are not API operations, so they
  // stay out of the OpenAPI document. Only GET and HEAD read them; other methods fall through.
  const serve: MiddlewareHandler = async (c, next) => {
    if (c.req.method !== "GET" && c.req.method !== "HEAD") return next();
    if (c.req.path === "/ui") return c.redirect("/ui/", 308);
    const notBuilt = () =>
      c.json(
        {
          error: {
            code: "not_found",
            message:
              "the web console is not built; run `pnpm build` (or `pnpm --filter @factflow/console build`) and restart the server",
          },
        },
        404,
      );
    if (root === undefined) return notBuilt();
    const rest = c.req.path.slice("/ui/".length);
    let relative: string;
    try {
      relative = rest === "" ? "index.html" : decodeURIComponent(rest);
    } catch {
      return c.json(
        { error: { code: "invalid_request", message: "the path has malformed percent-encoding" } },
        400,
      );
    }
    const file = resolve(root, relative);
    const type = TYPES[extname(file)];
    if (!file.startsWith(root + sep) || type === undefined || relative.includes("\0")) {
      return c.json({ error: { code: "not_found", message: `no console file ${c.req.path}` } }, 404);
    }
    const found = await stat(file).then(
      (s) => s.isFile(),
      () => false,
    );
    if (!found) {
      return relative === "index.html"
        ? notBuilt()
        : c.json({ error: { code: "not_found", message: `no console file ${c.req.path}` } }, 404);
    }
    const cache = relative.startsWith("assets/") ? "public, max-age=31536000, immutable" : "no-cache";
    return c.body(new Uint8Array(await readFile(file)), 200, securityHeaders(type, cache));
  };
  app.use("/ui", serve);
  app.use("/ui/*", serve);
  return app;
}
