import { afterAll, describe, expect, it } from "vitest";
import { EXAMPLE_DIR } from "../helpers.js";
import { expectRefusedStart, type ServerProcess, send, startServerProcess } from "./server-process.js";

const TOKEN = "security-test-token-0123456789";
const started: ServerProcess[] = [];
afterAll(async () => {
  for (const server of started) await server.stop();
});

describe("authentication is on when it matters", () => {
  it("refuses to listen beyond loopback without a token, saying how to set one", async () => {
    const refused = await expectRefusedStart({ FACTFLOW_HOST: "0.0.0.0" });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/FACTFLOW_API_TOKEN/);
    expect(refused.stderr).toMatch(/FACTFLOW_INSECURE=1/);
  });

  it("starts beyond loopback with --insecure, logging a warning", async () => {
    const server = await startServerProcess({ FACTFLOW_HOST: "0.0.0.0", FACTFLOW_CONFIG_DIR: EXAMPLE_DIR }, [
      "--insecure",
    ]);
    started.push(server);
    expect(server.log()).toMatch(/without an API token/);
  });

  it("protects reads too with FACTFLOW_API_TOKEN_READS=1, and never logs the token", async () => {
    const server = await startServerProcess({
      FACTFLOW_HOST: "0.0.0.0",
      FACTFLOW_API_TOKEN: TOKEN,
      FACTFLOW_API_TOKEN_READS: "1",
      FACTFLOW_CONFIG_DIR: EXAMPLE_DIR,
    });
    started.push(server);
    expect((await send(server.base, "GET", "/api/v1/executions")).status).toBe(401);
    const authorized = await send(server.base, "GET", "/api/v1/executions", {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(authorized.status).toBe(200);
    const start = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json", authorization: "Bearer wrong-token-wrong-token" },
      body: "{}",
    });
    expect(start.status).toBe(401);
    // Health stays open for load balancers.
    expect((await send(server.base, "GET", "/healthz")).status).toBe(200);
    expect(server.log()).not.toContain(TOKEN);
  });
});
