import { createFaultProxy, type FaultProxy } from "@factflow/infra-testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CallResult, call, startTestServer, waitFor } from "./helpers.js";
import { createTestDatabase, DATABASE_URL, unreachable } from "./services.js";

// While PostgreSQL cannot be reached (connections cut and refused through the testkit's fault
// proxy, or its backends terminated under load), every route that needs it answers 503
// `database_unavailable` with `Retry-After`, never a 500; once it answers again, so do they.

const skip = (await unreachable("the database outage tests", [DATABASE_URL])) !== undefined;

const PIPELINE = `
name: quick
init: { route: a, message: { n: 1 } }
routes:
  a:
    inbound: { queue: quick.a }
    adapters: [{ type: passthrough }]
`;

/** Asserts the one answer a request gets while the database is unreachable. */
function expectUnavailable(answer: CallResult, what: string): void {
  expect(answer.status, `${what}: ${answer.text}`).toBe(503);
  expect(answer.body.error.code, what).toBe("database_unavailable");
  expect(Number(answer.headers.get("retry-after")), `${what}: Retry-After`).toBeGreaterThan(0);
}

describe.skipIf(skip)("the HTTP API while PostgreSQL is unreachable", () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let proxy: FaultProxy;
  let ctx: Awaited<ReturnType<typeof startTestServer>>;
  let executionId = "";
  let messageId = "";
  const target = { host: new URL(DATABASE_URL).hostname, port: Number(new URL(DATABASE_URL).port || 5432) };

  /** The routes that read the database, for one execution and one of its messages. */
  const reads = () => [
    "/api/v1/executions",
    `/api/v1/executions/${executionId}`,
    `/api/v1/executions/${executionId}/input`,
    `/api/v1/executions/${executionId}/lineage`,
    `/api/v1/executions/${executionId}/lineage/${messageId}`,
  ];

  beforeAll(async () => {
    database = await createTestDatabase("factflow_server_outage");
    proxy = await createFaultProxy({ target });
    const url = new URL(database.url);
    url.hostname = proxy.host;
    url.port = String(proxy.port);
    ctx = await startTestServer({ database_url: url.toString(), embedded_mode: "memory" });
    expect(
      (await call(ctx.base, "POST", "/api/v1/configs/quick/versions", { source: PIPELINE })).status,
    ).toBe(201);
    const created = await call(ctx.base, "POST", "/api/v1/executions", { config: "quick" });
    expect(created.status).toBe(201);
    executionId = created.body.id;
    await waitFor(
      async () => {
        const one = await call(ctx.base, "GET", `/api/v1/executions/${executionId}`);
        return one.body.status === "completed" ? true : undefined;
      },
      60_000,
      "the execution to complete",
    );
    const rows = await call(ctx.base, "GET", `/api/v1/executions/${executionId}/lineage?kind=message`);
    messageId = rows.body.items[0].message_id;
  }, 180_000);

  afterAll(async () => {
    await ctx?.stop();
    await proxy?.close();
    await database?.drop();
  });

  it("answers 503 with Retry-After while connections are cut and refused, and 200 once it is back", async () => {
    const port = proxy.port;
    await proxy.close();
    try {
      for (const path of reads()) expectUnavailable(await call(ctx.base, "GET", path), `GET ${path}`);
      expectUnavailable(
        await call(ctx.base, "POST", "/api/v1/executions", { config: "quick" }),
        "POST /executions",
      );
      const ready = await call(ctx.base, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(Number(ready.headers.get("retry-after"))).toBeGreaterThan(0);
    } finally {
      proxy = await createFaultProxy({ target, listenPort: port });
    }
    await waitFor(
      async () => ((await call(ctx.base, "GET", "/readyz")).status === 200 ? true : undefined),
      60_000,
      "the server to be ready again",
    );
    for (const path of reads()) expect((await call(ctx.base, "GET", path)).status, path).toBe(200);
  }, 120_000);

  it("answers 200 or 503, never 500, while its backends are terminated under load", async () => {
    const statuses = new Map<number, number>();
    for (let round = 0; round < 8; round++) {
      const burst = Array.from({ length: 3 }, () =>
        reads().map((path) => call(ctx.base, "GET", path)),
      ).flat();
      await database.admin(
        `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${database.name}'`,
      );
      for (const answer of await Promise.all(burst)) {
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (answer.status !== 200) expectUnavailable(answer, "a read during the terminations");
      }
    }
    expect(
      [...statuses.keys()].every((s) => s === 200 || s === 503),
      JSON.stringify([...statuses]),
    ).toBe(true);
    for (const path of reads()) {
      const answer = await waitFor(
        async () => {
          const r = await call(ctx.base, "GET", path);
          return r.status === 200 ? r : undefined;
        },
        30_000,
        `${path} to answer again`,
      );
      expect(answer.status).toBe(200);
    }
  }, 120_000);
});
