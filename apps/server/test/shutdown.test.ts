import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Logger, silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { Hono } from "hono";
import { afterAll, describe, expect, it } from "vitest";
import { errorHandler } from "../src/http-errors.js";
import { startServer } from "../src/server.js";
import { call } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "factflow-shutdown-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SLOW = `
name: slow
init: { route: wait, message: {} }
routes:
  wait:
    inbound: { queue: slow.wait }
    adapters:
      - type: delay
        config: { ms: 600000 }
`;

/** A logger that keeps the errors it is given. */
function errorsLogger(errors: string[]): Logger {
  const logger: Logger = {
    ...silentLogger,
    error: (message, fields) => errors.push(`${message} ${JSON.stringify(fields ?? {})}`),
    child: () => logger,
  };
  return logger;
}

describe("a request to a server that is shutting down", () => {
  it("is answered 503 shutting_down with Retry-After when the store closed under it, and not logged", async () => {
    const logged: string[] = [];
    let stopping = false;
    const app = new Hono();
    app.onError(
      errorHandler(
        (message) => logged.push(message),
        () => stopping,
      ),
    );
    app.get("/read", () => {
      throw new Error("PGlite is closed");
    });

    const before = await app.request("/read");
    expect(before.status).toBe(500);
    expect(logged).toEqual(["request failed"]);

    stopping = true;
    const during = await app.request("/read");
    expect(during.status).toBe(503);
    expect(during.headers.get("Retry-After")).toBe("5");
    expect(((await during.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    expect(logged).toEqual(["request failed"]);
  });

  it("never answers 500 while a real server closes under a stream of reads", async () => {
    const errors: string[] = [];
    const settings = loadSettings({
      env: {},
      cwd: dir,
      overrides: { data_dir: join(dir, "data"), config_dir: join(dir, "configs"), port: 0 },
    });
    const server = await startServer(settings, { logger: errorsLogger(errors) });
    expect((await call(server.url, "POST", "/api/v1/configs/slow/versions", { source: SLOW })).status).toBe(
      201,
    );
    const started = await call(server.url, "POST", "/api/v1/executions", { config: "slow" });
    expect(started.status).toBe(201);
    const paths = [
      "/api/v1/system/info",
      "/api/v1/executions",
      `/api/v1/executions/${started.body.id}`,
      `/api/v1/executions/${started.body.id}/lineage`,
    ];

    // Each reader repeats its read until the server refuses the connection.
    const answers: string[] = [];
    let closing = false;
    const reader = async (path: string) => {
      for (;;) {
        let answer: Awaited<ReturnType<typeof call>>;
        try {
          answer = await call(server.url, "GET", path);
        } catch {
          if (closing) return;
          throw new Error(`GET ${path} failed before the server began to close`);
        }
        const code = answer.status === 200 ? "" : ` ${answer.body?.error?.code}`;
        answers.push(`${answer.status}${code}`);
        if (answer.status === 503) expect(answer.headers.get("retry-after"), path).toBe("5");
      }
    };
    const readers = paths.flatMap((path) => [reader(path), reader(path)]);
    // Close once every reader has been answered at least once.
    while (answers.length < paths.length * 2) await new Promise((r) => setImmediate(r));
    closing = true;
    await server.close();
    await Promise.all(readers);

    expect(answers.filter((a) => a !== "200" && a !== "503 shutting_down")).toEqual([]);
    expect(answers.filter((a) => a === "200").length).toBeGreaterThanOrEqual(paths.length * 2);
    expect(errors).toEqual([]);
  }, 180_000);
});
