import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { afterAll, describe, expect, it } from "vitest";
import { startServer } from "../src/server.js";
import { call, waitFor } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "factflow-queue-defs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The route itself asks for concurrency 2; the stored definition (concurrency 0) overrides it.
const PIPELINE = `
name: named-queues
init: { route: fan, message: { items: [1, 2, 3, 4, 5, 6] } }
queues:
  work.in:
    concurrency: 2
routes:
  fan:
    inbound: { queue: fan.in }
    adapters:
      - type: split
        config: { field: items }
    outbound: [work.in]
  work:
    inbound: { queue: work.in }
    adapters: [{ type: passthrough }]
`;

function settings() {
  return loadSettings({
    env: {},
    cwd: dir,
    overrides: { data_dir: join(dir, "data"), config_dir: join(dir, "configs"), port: 0 },
  });
}

describe("named queue definitions", () => {
  it("are stored durably, converged when the next server starts, and converged at runtime by PUT", async () => {
    const first = await startServer(settings(), { logger: silentLogger });
    let id: string;
    try {
      const paused = await call(first.url, "PUT", "/api/v1/queues/work.in/definition", {
        concurrency: 0,
        timeout_ms: 60_000,
      });
      expect(paused.status).toBe(200);
      expect(paused.body).toMatchObject({ queue: "work.in", changed: true, definition: { concurrency: 0 } });
      const again = await call(first.url, "PUT", "/api/v1/queues/work.in/definition", { concurrency: 0 });
      expect(again.body.changed).toBe(false);
      const stored = JSON.parse(readFileSync(join(dir, "data", "queue-definitions.json"), "utf8"));
      expect(stored.queues["work.in"]).toEqual({ concurrency: 0, timeout_ms: 60_000 });

      expect(
        (await call(first.url, "POST", "/api/v1/configs/named-queues/versions", { source: PIPELINE })).status,
      ).toBe(201);
      const created = await call(first.url, "POST", "/api/v1/executions", { config: "named-queues" });
      expect(created.status).toBe(201);
      id = created.body.id as string;
      const status = await waitFor(async () => {
        const r = await call(first.url, "GET", "/api/v1/queues/work.in");
        return r.body.executions?.[0]?.depth === 6 ? r.body : undefined;
      });
      expect(status.definition).toEqual({ concurrency: 0, timeout_ms: 60_000 });
      expect(status.executions[0]).toMatchObject({
        execution_id: id,
        route: "work",
        consumers: 0,
        effective: { concurrency: 0, timeout_ms: 60_000 },
      });
    } finally {
      await first.close();
    }

    // Between the two starts only the stored definition remains: the resumed execution stays paused.
    const second = await startServer(settings(), { logger: silentLogger });
    try {
      await new Promise((r) => setTimeout(r, 500));
      const still = await call(second.url, "GET", `/api/v1/executions/${id}`);
      expect(still.body.status).toBe("running");
      const queue = await call(second.url, "GET", "/api/v1/queues/work.in");
      // Still paused: nothing consumed (a resume may re-publish open rows, so at least the six wait).
      expect(queue.body.executions[0]).toMatchObject({ consumers: 0, effective: { concurrency: 0 } });
      expect(queue.body.executions[0].depth).toBeGreaterThanOrEqual(6);

      const resumed = await call(second.url, "PUT", "/api/v1/queues/work.in/definition", { concurrency: 3 });
      expect(resumed.status).toBe(200);
      expect(resumed.body.definition).toEqual({ concurrency: 3, timeout_ms: 60_000 });
      const done = await waitFor(async () => {
        const r = await call(second.url, "GET", `/api/v1/executions/${id}`);
        return r.body.status === "running" ? undefined : r.body;
      });
      expect(done.status).toBe("completed");
      const rows = await call(second.url, "GET", `/api/v1/executions/${id}/lineage?kind=message&limit=100`);
      const work = rows.body.items.filter((r: { route: string }) => r.route === "work");
      expect(work).toHaveLength(6);
      expect(work.every((r: { status: string }) => r.status === "completed")).toBe(true);

      const bad = await call(second.url, "PUT", "/api/v1/queues/work.in/definition", { concurrency: -1 });
      expect(bad.status).toBe(400);
      const unknown = await call(second.url, "PUT", "/api/v1/queues/work.in/definition", { colour: "red" });
      expect(unknown.status).toBe(400);
    } finally {
      await second.close();
    }
  }, 180_000);
});
