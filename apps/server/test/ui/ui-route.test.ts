import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { CONSOLE_CSP, defaultConsoleDir, uiRoutes } from "../../src/routes/ui.js";
import { startTestServer } from "../helpers.js";

const dir = mkdtempSync(join(tmpdir(), "factflow-ui-"));
mkdirSync(join(dir, "assets"));
writeFileSync(join(dir, "index.html"), "<!doctype html><title>console</title>");
writeFileSync(join(dir, "assets/index-abc123.js"), "console.log(1)");
writeFileSync(join(dir, "assets/index-abc123.css"), "body{}");
writeFileSync(join(dir, "secret.key"), "not served: unknown type");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const app = uiRoutes(dir);

describe("the console's static files at /ui", () => {
  it("redirects /ui to /ui/ and serves index.html there, revalidated on every load", async () => {
    const redirect = await app.request("/ui");
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get("location")).toBe("/ui/");
    const index = await app.request("/ui/");
    expect(index.status).toBe(200);
    expect(index.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(index.headers.get("cache-control")).toBe("no-cache");
    expect(index.headers.get("content-security-policy")).toBe(CONSOLE_CSP);
    expect(index.headers.get("x-content-type-options")).toBe("nosniff");
    expect(await index.text()).toContain("<title>console</title>");
  });

  it("serves hashed assets with their content type, cached for a year", async () => {
    const js = await app.request("/ui/assets/index-abc123.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(js.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const css = await app.request("/ui/assets/index-abc123.css");
    expect(css.headers.get("content-type")).toBe("text/css; charset=utf-8");
  });

  it("answers 404 for missing files, unknown types and paths that leave the build", async () => {
    for (const path of [
      "/ui/assets/missing.js",
      "/ui/secret.key",
      "/ui/../package.json",
      "/ui/%2e%2e/%2e%2e/package.json",
      "/ui/assets/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    ]) {
      const response = await app.request(path);
      expect(response.status, path).toBe(404);
    }
    expect((await app.request("/ui/%E0%A4%A")).status).toBe(400);
  });

  it("says how to build the console when it is not built", async () => {
    const response = await uiRoutes(join(dir, "nowhere")).request("/ui/");
    expect(response.status).toBe(404);
    const body = (await response.json()) as { error: { message: string } };
    expect(body.error.message).toContain("pnpm build");
  });

  it("finds the workspace's console package", () => {
    expect(defaultConsoleDir()).toMatch(/apps[/\\]console[/\\]dist$/);
  });
});

describe("/ui in the running server", () => {
  it("is served behind the Host check and needs no token to load", async () => {
    const { base, stop } = await startTestServer();
    try {
      const page = await fetch(`${base}/ui/`);
      // Built or not, the route answers (200 with a build, 404 with how to build without one).
      expect([200, 404]).toContain(page.status);
      const { request } = await import("node:http");
      const status = await new Promise<number>((resolve, reject) => {
        const url = new URL(base);
        request(
          { host: url.hostname, port: url.port, path: "/ui/", headers: { host: "evil.example" } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        )
          .on("error", reject)
          .end();
      });
      expect(status).toBe(421);
    } finally {
      await stop();
    }
  });
});
