import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { afterAll, describe, expect, it } from "vitest";
import { startServer } from "../src/server.js";
import { call, waitFor } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "factflow-restart-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PIPELINE = `
name: pause
init: { route: wait, message: { n: 1 } }
routes:
  wait:
    inbound: { queue: pause.in }
    adapters:
      - type: delay
        config: { ms: 1500 }
`;

function settings() {
  return loadSettings({
    env: {},
    cwd: dir,
    overrides: { data_dir: join(dir, "data"), config_dir: join(dir, "configs"), port: 0 },
  });
}

describe("graceful shutdown and restart (embedded file provider)", () => {
  it("leaves a running execution running on shutdown and resumes it on the next start", async () => {
    const first = await startServer(settings(), { logger: silentLogger });
    expect(
      (await call(first.url, "POST", "/api/v1/configs/pause/versions", { source: PIPELINE })).status,
    ).toBe(201);
    const created = await call(first.url, "POST", "/api/v1/executions", { config: "pause" });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    // Wait until the message is in its handler, then stop the server under it.
    await waitFor(async () => {
      const rows = await call(first.url, "GET", `/api/v1/executions/${id}/lineage?kind=adapter`);
      return rows.body.total > 0 ? true : undefined;
    });
    await first.close();
    const readyAfterClose = await fetch(`${first.url}/healthz`).then(
      () => "answered",
      () => "refused",
    );
    expect(readyAfterClose).toBe("refused");

    const second = await startServer(settings(), { logger: silentLogger });
    try {
      const stopped = await call(second.url, "GET", `/api/v1/executions/${id}`);
      expect(stopped.body.status).toBe("running");
      const done = await waitFor(
        async () => {
          const r = await call(second.url, "GET", `/api/v1/executions/${id}`);
          return r.body.status === "running" ? undefined : r.body;
        },
        30_000,
        "the resumed execution to finish",
      );
      expect(done.status).toBe("completed");
      expect(done.routes.wait.messages.completed).toBe(1);
    } finally {
      await second.close();
    }
  }, 180_000);
});
