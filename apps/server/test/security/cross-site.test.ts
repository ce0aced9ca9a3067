import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLE_DIR } from "../helpers.js";
import { type ServerProcess, send, startServerProcess } from "./server-process.js";

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess({ FACTFLOW_CONFIG_DIR: EXAMPLE_DIR });
});
afterAll(async () => {
  await server?.stop();
});

const startBody = JSON.stringify({ config: "docs-ingest", input: { roots: [] } });

async function executionCount(): Promise<number> {
  return (await send(server.base, "GET", "/api/v1/executions")).body.total;
}

describe("no cross-site writes", () => {
  it("refuses bodies a page can send without a preflight (text/plain, forms) with 415", async () => {
    const before = await executionCount();
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
    ]) {
      const response = await send(server.base, "POST", "/api/v1/executions", {
        headers: { "content-type": type },
        body: startBody,
      });
      expect(response.status, type).toBe(415);
      expect(response.body.error.message).toMatch(/application\/json/);
    }
    expect(await executionCount()).toBe(before);
  });

  it("refuses a foreign Origin (403), even with a JSON body, and lets retention delete nothing", async () => {
    // One finished execution that a cross-site retention call must not delete.
    const created = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json" },
      body: startBody,
    });
    expect(created.status).toBe(201);
    await waitForEnd(created.body.id);
    const before = await executionCount();
    for (const [type, body] of [
      ["text/plain", '{"older_than_days":0}'],
      ["application/json", '{"older_than_days":0}'],
    ] as const) {
      const response = await send(server.base, "POST", "/api/v1/system/retention", {
        headers: { "content-type": type, origin: "http://evil.example" },
        body,
      });
      expect(response.status, type).toBe(403);
    }
    const noBody = await send(server.base, "POST", `/api/v1/executions/${created.body.id}/cancel`, {
      headers: { origin: "null" },
    });
    expect(noBody.status).toBe(403);
    const fetchMetadata = await send(server.base, "POST", "/api/v1/system/mq-diagnostic", {
      headers: { "sec-fetch-site": "cross-site" },
    });
    expect(fetchMetadata.status).toBe(403);
    expect(await executionCount()).toBe(before);
  });

  it("accepts the server's own origin", async () => {
    const response = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json", origin: server.base },
      body: startBody,
    });
    expect(response.status).toBe(201);
    await waitForEnd(response.body.id);
  });

  it("answers 421 to a Host it does not serve (DNS rebinding), for reads too", async () => {
    for (const path of ["/api/v1/executions", "/api/v1/system/info", "/metrics", "/healthz"]) {
      const response = await send(server.base, "GET", path, {
        headers: { host: `evil.example:${server.port}` },
      });
      expect(response.status, path).toBe(421);
      expect(response.body.error.code).toBe("host_not_allowed");
    }
    for (const host of [`localhost:${server.port}`, `127.0.0.1:${server.port}`, `[::1]:${server.port}`]) {
      expect((await send(server.base, "GET", "/healthz", { headers: { host } })).status, host).toBe(200);
    }
  });
});

async function waitForEnd(id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const status = (await send(server.base, "GET", `/api/v1/executions/${id}`)).body.status;
    if (status !== "running") return;
    if (Date.now() > deadline) throw new Error(`execution ${id} still running after 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
