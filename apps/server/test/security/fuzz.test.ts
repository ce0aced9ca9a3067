import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLE_DIR } from "../helpers.js";
import { fuzzRoutes } from "./fuzz-routes.js";
import { type ServerProcess, send, startServerProcess } from "./server-process.js";

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess({ FACTFLOW_CONFIG_DIR: EXAMPLE_DIR });
});
afterAll(async () => {
  await server?.stop();
});

/** What the fuzzing must leave as it was. */
async function snapshot() {
  const executions = await send(server.base, "GET", "/api/v1/executions?limit=500");
  const configs = await send(server.base, "GET", "/api/v1/configs");
  return {
    executions: executions.body.items.map((e: { id: string; status: string }) => `${e.id}:${e.status}`),
    configs: configs.body.items.map(
      (c: { name: string; version: number | null }) => `${c.name}@${c.version}`,
    ),
  };
}

// Routes whose documented answer to a broken dependency is 503: not a fault of the request.
const MAY_BE_503 = new Set(["/readyz", "/api/v1/system/mq-diagnostic"]);

describe("every route answers hostile input with a 4xx (a 500 is always a bug)", () => {
  it("fuzzes paths, queries and bodies of every documented route and leaves the server unchanged", async () => {
    // A finished execution: a hostile retention or delete call must leave it in place.
    const created = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ config: "docs-ingest", input: { roots: [] } }),
    });
    expect(created.status).toBe(201);
    const deadline = Date.now() + 60_000;
    while (
      (await send(server.base, "GET", `/api/v1/executions/${created.body.id}`)).body.status === "running"
    ) {
      if (Date.now() > deadline) throw new Error("the seed execution did not finish");
      await new Promise((r) => setTimeout(r, 100));
    }
    const before = await snapshot();
    const cases = await fuzzRoutes(server.base);
    const statuses = [...new Set(cases.map((c) => c.status))].sort().join(", ");
    console.log(`[factflow/server] fuzzed ${cases.length} hostile requests; statuses seen: ${statuses}`);
    expect(cases.length).toBeGreaterThan(500);
    const faults = cases.filter(
      (c) => c.status >= 500 && !(c.status === 503 && MAY_BE_503.has(c.path.split("?")[0] ?? "")),
    );
    expect(faults).toEqual([]);
    expect(await snapshot()).toEqual(before);
    expect((await send(server.base, "GET", "/healthz")).status).toBe(200);
    expect(server.log()).not.toMatch(/"level":"error"/);
  });
});
