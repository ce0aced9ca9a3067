import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ServerProcess, send, startServerProcess } from "./server-process.js";

// Each refused module would create this file if it ever ran.
const work = mkdtempSync(join(tmpdir(), "factflow-code-"));
const marker = join(work, "pwned");
const evilSource = `import("node:fs").then((fs) => fs.writeFileSync(${JSON.stringify(marker)}, "x")); export const adapters = [];`;
const outsideModule = join(work, "outside.mjs");
writeFileSync(outsideModule, evilSource);
const configDir = join(work, "configs");
mkdirSync(configDir);
writeFileSync(
  join(configDir, "shout.mjs"),
  `export const adapters = [{ type: "shout", create: () => ({ type: "shout", process: (ctx) => ({ data: ctx.message }) }) }];\n`,
);

const pipeline = (name: string, module: string) =>
  [
    `name: ${name}`,
    `adapter_modules: [${JSON.stringify(module)}]`,
    "init: { route: a }",
    "routes:",
    "  a:",
    "    inbound: { queue: a.in }",
    "    adapters: [{ type: passthrough }]",
    "",
  ].join("\n");

const MODULES = [
  `data:text/javascript,${encodeURIComponent(evilSource)}`,
  outsideModule,
  `file://${outsideModule}`,
  "node:child_process",
  "../outside.mjs",
];

let server: ServerProcess;
beforeAll(async () => {
  server = await startServerProcess({ FACTFLOW_CONFIG_DIR: configDir });
});
afterAll(async () => {
  await server?.stop();
});

describe("code comes only from where the operator put it", () => {
  it("refuses the exact cross-site request that used to run a data: module (text/plain, foreign Origin)", async () => {
    const response = await send(server.base, "POST", "/api/v1/configs/validate", {
      headers: { "content-type": "text/plain", origin: "http://evil.example" },
      body: pipeline("evil", MODULES[0] as string),
    });
    expect(response.status).toBe(403);
    expect(response.body.error.code).toBe("origin_not_allowed");
  });

  it("validates without importing: every module outside the allowlist is an issue naming it and the setting", async () => {
    for (const module of MODULES) {
      const response = await send(server.base, "POST", "/api/v1/configs/validate", {
        headers: { "content-type": "application/yaml" },
        body: pipeline("evil", module),
      });
      expect(response.status, module).toBe(200);
      expect(response.body.valid, module).toBe(false);
      const issue = response.body.issues.find((i: { path: string }) => i.path === "adapter_modules[0]");
      expect(issue?.message, module).toMatch(/is refused: .*FACTFLOW_ADAPTER_DIRS/);
    }
  });

  it("answers 422 to an upload naming such a module, and stores nothing", async () => {
    for (const module of MODULES) {
      const response = await send(server.base, "POST", "/api/v1/configs/evil/versions", {
        headers: { "content-type": "application/yaml" },
        body: pipeline("evil", module),
      });
      expect(response.status, module).toBe(422);
      expect(JSON.stringify(response.body.error.issues), module).toContain("is refused");
    }
    const configs = await send(server.base, "GET", "/api/v1/configs");
    expect(configs.body.items.map((c: { name: string }) => c.name)).not.toContain("evil");
  });

  it("still loads a module from the config directory (the operator's allowlist by default)", async () => {
    const response = await send(server.base, "POST", "/api/v1/configs/validate", {
      headers: { "content-type": "application/yaml" },
      body: pipeline("ok", "./shout.mjs").replace("type: passthrough", "type: shout"),
    });
    expect(response.body).toMatchObject({ valid: true, name: "ok" });
  });

  it("never ran any refused module", () => {
    expect(existsSync(marker)).toBe(false);
  });
});
