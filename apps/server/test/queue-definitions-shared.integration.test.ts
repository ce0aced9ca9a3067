import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectPostgres } from "@factflow/lineage";
import { type Logger, silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { afterAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { call, waitFor } from "./helpers.js";
import { DATABASE_URL, unreachable } from "./services.js";

// Two servers on one PostgreSQL keep one set of named queue definitions (docs/deployment.md): a
// server's GET shows what another one stored, a PUT on one converges the running consumers of the
// other, and a queue-definitions.json found in a data directory is imported once.

const skip = (await unreachable("shared queue definitions", [DATABASE_URL])) !== undefined;

const PIPELINE = `
name: shared-queues
init: { route: fan, message: { items: [1, 2, 3, 4, 5, 6] } }
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

async function admin(statement: string): Promise<void> {
  const handles = await connectPostgres(DATABASE_URL, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
  try {
    await handles.writer.execute(statement, []);
  } finally {
    await handles.close();
  }
}

/** Records the info messages (and their fields) of a server, drops the rest. */
function recordingLogger(): Logger & { infos: { message: string; fields?: Record<string, unknown> }[] } {
  const infos: { message: string; fields?: Record<string, unknown> }[] = [];
  const logger = {
    infos,
    debug() {},
    info(message: string, fields?: Record<string, unknown>) {
      infos.push(fields === undefined ? { message } : { message, fields });
    },
    warn() {},
    error() {},
    child: () => logger,
  };
  return logger;
}

describe.skipIf(skip)("named queue definitions with PostgreSQL lineage", () => {
  const dir = mkdtempSync(join(tmpdir(), "factflow-queue-defs-shared-"));
  const databaseName = `factflow_qdefs_server_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  const url = new URL(DATABASE_URL);
  url.pathname = `/${databaseName}`;
  let created = false;
  afterAll(async () => {
    if (created) await admin(`drop database if exists "${databaseName}" with (force)`);
    rmSync(dir, { recursive: true, force: true });
  });

  const settings = (name: string) =>
    loadSettings({
      env: {},
      cwd: dir,
      overrides: {
        database_url: url.toString(),
        data_dir: join(dir, name, "data"),
        config_dir: join(dir, name, "configs"),
        port: 0,
      },
    });

  it("are the same on every server, and a PUT on one converges the consumers of another", async () => {
    await admin(`create database "${databaseName}"`);
    created = true;
    // Server A had kept its definitions in its data directory before: they are imported once.
    mkdirSync(join(dir, "a", "data"), { recursive: true });
    writeFileSync(
      join(dir, "a", "data", "queue-definitions.json"),
      `${JSON.stringify({ version: 1, queues: { "work.in": { concurrency: 0, timeout_ms: 60_000 } } })}\n`,
    );
    const logsA = recordingLogger();
    let a: RunningServer | undefined;
    let b: RunningServer | undefined;
    try {
      a = await startServer(settings("a"), { logger: logsA });
      expect(logsA.infos).toContainEqual({
        message: "imported queue definitions from the data directory into the database",
        fields: expect.objectContaining({ queues: ["work.in"] }),
      });
      b = await startServer(settings("b"), { logger: silentLogger });
      const onB = await call(b.url, "GET", "/api/v1/queues/work.in");
      expect(onB.status).toBe(200);
      expect(onB.body.definition).toEqual({ concurrency: 0, timeout_ms: 60_000 });

      // An execution running on B waits: its work route is paused by the shared definition.
      expect(
        (await call(b.url, "POST", "/api/v1/configs/shared-queues/versions", { source: PIPELINE })).status,
      ).toBe(201);
      const started = await call(b.url, "POST", "/api/v1/executions", { config: "shared-queues" });
      expect(started.status).toBe(201);
      const id = started.body.id as string;
      await waitFor(
        async () => {
          const r = await call(b!.url, "GET", "/api/v1/queues/work.in");
          return r.body.executions?.[0]?.depth === 6 ? r.body : undefined;
        },
        60_000,
        "six messages waiting on the paused queue",
      );

      // A PUT on A resumes it on B.
      const resumed = await call(a.url, "PUT", "/api/v1/queues/work.in/definition", { concurrency: 3 });
      expect(resumed.status).toBe(200);
      expect(resumed.body).toMatchObject({
        changed: true,
        definition: { concurrency: 3, timeout_ms: 60_000 },
      });
      for (const server of [a, b]) {
        const r = await call(server.url, "GET", "/api/v1/queues/work.in");
        expect(r.body.definition).toEqual({ concurrency: 3, timeout_ms: 60_000 });
      }
      const done = await waitFor(
        async () => {
          const r = await call(b!.url, "GET", `/api/v1/executions/${id}`);
          return r.body.status === "running" ? undefined : r.body;
        },
        120_000,
        "the execution on B to end",
      );
      expect(done.status).toBe("completed");
    } finally {
      await b?.close();
      await a?.close();
    }

    // A restart of A with the file still there imports nothing: the table already has the name.
    const again = recordingLogger();
    const restarted = await startServer(settings("a"), { logger: again });
    try {
      expect(again.infos.map((i) => i.message)).not.toContain(
        "imported queue definitions from the data directory into the database",
      );
      const r = await call(restarted.url, "GET", "/api/v1/queues/work.in");
      expect(r.body.definition).toEqual({ concurrency: 3, timeout_ms: 60_000 });
    } finally {
      await restarted.close();
    }
  }, 300_000);
});
