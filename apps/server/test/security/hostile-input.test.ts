import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EXAMPLE_DIR } from "../helpers.js";
import { type ServerProcess, send, startServerProcess } from "./server-process.js";

let server: ServerProcess;
beforeAll(async () => {
  // A body limit above the embedded provider's 4 MiB message limit, as in the reported case.
  server = await startServerProcess({
    FACTFLOW_CONFIG_DIR: EXAMPLE_DIR,
    FACTFLOW_BODY_LIMIT_BYTES: "16777216",
  });
});
afterAll(async () => {
  await server?.stop();
});

const json = (body: unknown) => ({
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
const yaml = (body: string) => ({ headers: { "content-type": "application/yaml" }, body });
const total = async () => (await send(server.base, "GET", "/api/v1/executions")).body.total as number;

function expectClear4xx(
  response: { status: number; body: { error?: { message?: string } } },
  pattern: RegExp,
) {
  expect(response.status).toBeGreaterThanOrEqual(400);
  expect(response.status).toBeLessThan(500);
  expect(response.body.error?.message).toMatch(pattern);
}

describe("hostile input gets a clear 4xx and leaves nothing behind", () => {
  it("refuses NUL and lone surrogates in the path, the query and the input, naming the part", async () => {
    const before = await total();
    expectClear4xx(await send(server.base, "GET", "/api/v1/executions/a%00b"), /path .*NUL/);
    expectClear4xx(await send(server.base, "GET", "/api/v1/configs/a%00b"), /path .*NUL/);
    expectClear4xx(
      await send(server.base, "GET", "/api/v1/executions?config=a%00b"),
      /query parameter "config" .*NUL/,
    );
    expectClear4xx(
      await send(server.base, "GET", "/api/v1/executions?config=%ED%A0%80"),
      /malformed percent-encoding/,
    );
    const nul = await send(
      server.base,
      "POST",
      "/api/v1/executions",
      json({ config: "docs-ingest", input: { a: "x\u0000y" } }),
    );
    expectClear4xx(nul, /input\.a .*NUL/);
    const lone = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json" },
      body: '{"config":"docs-ingest","input":{"a":"\\ud800"}}',
    });
    expectClear4xx(lone, /surrogate/);
    expect(await total()).toBe(before);
  });

  it("refuses a NUL in a config with the path of the value", async () => {
    const source =
      'name: n\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: log, config: { message: "a\\0b" } }]\n';
    const response = await send(server.base, "POST", "/api/v1/configs/n/versions", yaml(source));
    expect(response.status).toBe(422);
    expect(response.body.error.issues[0]).toMatchObject({ path: "routes.a.adapters[0].config.message" });
  });

  it("refuses input nested 10,000 deep with the depth limit (400), storing nothing", async () => {
    const before = await total();
    const body = `{"config":"docs-ingest","input":${"[".repeat(10_000)}${"]".repeat(10_000)}}`;
    const response = await send(server.base, "POST", "/api/v1/executions", {
      headers: { "content-type": "application/json" },
      body,
    });
    expect(response.status).toBe(400);
    expect(response.body.error.message).toMatch(/more than 64 levels/);
    expect(await total()).toBe(before);
  });

  it("refuses a config nested 10,000 deep with the depth limit", async () => {
    const source = `name: d\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters: [{ type: log, config: { x: ${"[".repeat(10_000)}${"]".repeat(10_000)} } }]\n`;
    const validated = await send(server.base, "POST", "/api/v1/configs/validate", yaml(source));
    expect(validated.status).toBe(200);
    expect(validated.body.valid).toBe(false);
    expect(validated.body.issues[0].message).toMatch(/nested more than 64 levels/);
    const uploaded = await send(server.base, "POST", "/api/v1/configs/d/versions", yaml(source));
    expect(uploaded.status).toBe(422);
  });

  it("refuses more routes than the limit with 422, and reports a 1,000-route cycle as an issue", async () => {
    const routes = (n: number, cycle: boolean) => {
      const lines = ["name: big", "init: { route: r0 }", "routes:"];
      for (let i = 0; i < n; i++) {
        const next = i + 1 < n ? `[q${i + 1}]` : cycle ? "[q0]" : "[]";
        lines.push(
          `  r${i}:`,
          `    inbound: { queue: q${i} }`,
          `    outbound: ${next}`,
          "    adapters: [{ type: passthrough }]",
        );
      }
      return `${lines.join("\n")}\n`;
    };
    const tooMany = await send(
      server.base,
      "POST",
      "/api/v1/configs/big/versions",
      yaml(routes(1001, false)),
    );
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.issues[0].message).toMatch(/1001 routes, over the limit of 1000/);
    const cycle = await send(server.base, "POST", "/api/v1/configs/validate", yaml(routes(1000, true)));
    expect(cycle.status).toBe(200);
    expect(cycle.body.issues[0].message).toMatch(/form a cycle with no way out/);
  });

  it("refuses an input larger than the provider can carry before writing any row (413)", async () => {
    const before = await total();
    const big = await send(
      server.base,
      "POST",
      "/api/v1/executions",
      json({ config: "docs-ingest", input: { blob: "x".repeat(6_000_000) } }),
    );
    expect(big.status).toBe(413);
    expect(big.body.error.message).toMatch(/artefacts/);
    // The server answers 413 from the content-length without reading the body and closes: a client
    // still writing 50 MB may see the connection cut (EPIPE, ECONNRESET) before it reads the answer.
    const huge = await send(
      server.base,
      "POST",
      "/api/v1/executions",
      json({ config: "docs-ingest", input: { blob: "x".repeat(50_000_000) } }),
    ).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "EPIPE" || error.code === "ECONNRESET") return "cut while sending" as const;
      throw error;
    });
    if (huge !== "cut while sending") expect(huge.status).toBe(413);
    expect(await total()).toBe(before);
  });

  it("lists executions without inputs; the detail inlines small inputs and points to large ones", async () => {
    const blob = "y".repeat(100_000);
    const created = await send(
      server.base,
      "POST",
      "/api/v1/executions",
      json({ config: "docs-ingest", input: { roots: [], blob } }),
    );
    expect(created.status).toBe(201);
    const list = await send(server.base, "GET", "/api/v1/executions");
    for (const item of list.body.items) expect(item).not.toHaveProperty("input");
    const detail = await send(server.base, "GET", `/api/v1/executions/${created.body.id}`);
    expect(detail.body.input).toBeNull();
    expect(detail.body.input_bytes).toBeGreaterThan(100_000);
    expect(detail.body.input_omitted).toMatch(/\/input$/);
    const input = await send(server.base, "GET", `/api/v1/executions/${created.body.id}/input`);
    expect(input.body.input.blob).toBe(blob);
  });
});
