import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Logger, silentLogger } from "@factflow/protocols";
import { loadSettings } from "@factflow/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningServer, startServer } from "../src/server.js";
import { call, TOKEN, waitFor } from "./helpers.js";

// A server whose execution stops making progress: it logs what the execution waits for once per
// stall, and `GET /executions/{id}` shows it in `stall` until the execution moves again.

/** Set by the `wait_for_test` adapter (loaded by the server in this process): releases its call. */
const RELEASE = "__factflowStallTestRelease";

const ADAPTERS = `
export const adapters = [
  {
    type: "wait_for_test",
    description: "waits until the test releases it",
    create: () => ({
      type: "wait_for_test",
      process: (ctx) => new Promise((resolve) => {
        globalThis.${RELEASE} = () => resolve({ data: ctx.message });
      }),
    }),
  },
];
`;

const PIPELINE = `
name: waits
adapter_modules: [./adapters.mjs]
init: { route: a, message: { n: 1 } }
routes:
  a: { inbound: { queue: waits.a }, adapters: [{ type: passthrough }], outbound: [waits.b] }
  b: { inbound: { queue: waits.b }, adapters: [{ type: wait_for_test }] }
`;

const dir = mkdtempSync(join(tmpdir(), "factflow-stall-"));
const warnings: { message: string; fields: Record<string, unknown> | undefined }[] = [];
const logger: Logger = {
  ...silentLogger,
  warn: (message, fields) => {
    warnings.push({ message, fields });
  },
  child: () => logger,
};
let server: RunningServer;

beforeAll(async () => {
  const configs = join(dir, "configs");
  mkdirSync(configs);
  writeFileSync(join(configs, "adapters.mjs"), ADAPTERS);
  writeFileSync(join(configs, "waits.yaml"), PIPELINE);
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: {
      data_dir: join(dir, "data"),
      config_dir: configs,
      // The file provider's own behaviour is not what this test is about.
      embedded_mode: "memory",
      port: 0,
      api_token: TOKEN,
      stall_after_s: 1,
    },
  });
  server = await startServer(settings, { logger });
});

afterAll(async () => {
  (globalThis as Record<string, unknown>)[RELEASE] = undefined;
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a stalled execution", () => {
  it("is logged once and shown in GET /executions/{id} until it moves again", async () => {
    const created = await call(server.url, "POST", "/api/v1/executions", { config: "waits" });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const path = `/api/v1/executions/${id}`;

    const stall = await waitFor(
      async () => (await call(server.url, "GET", path)).body.stall ?? undefined,
      30_000,
      "the stall in the execution's detail",
    );
    expect(stall.phase).toBe("running");
    expect(stall.quiet_ms).toBeGreaterThanOrEqual(1000);
    expect(stall.waiting_for).toContain('route "b": 1 delivery running its adapters');
    const b = stall.routes.find((r: { route: string }) => r.route === "b");
    expect(b).toMatchObject({ queue: "waits.b", in_flight: 1, held: 0, broker: { depth: 0 } });
    expect(b.messages.total).toBe(1);

    const logged = () => warnings.filter((w) => w.fields?.executionId === id);
    await waitFor(async () => (logged().length > 0 ? true : undefined), 10_000, "the stall warning");
    expect(logged()[0]?.message).toMatch(/^execution has made no progress for \d+ s; waiting for: route "b"/);
    expect(logged()[0]?.fields?.stall).toMatchObject({ waiting_for: stall.waiting_for });

    // Quiet for several more periods: still one warning, and the detail keeps the quiet time current.
    await waitFor(
      async () => {
        const detail = (await call(server.url, "GET", path)).body;
        return detail.stall?.quiet_ms >= 4000 ? true : undefined;
      },
      30_000,
      "a longer quiet",
    );
    expect(logged()).toHaveLength(1);

    ((globalThis as Record<string, unknown>)[RELEASE] as (() => void) | undefined)?.();
    const done = await waitFor(
      async () => {
        const detail = (await call(server.url, "GET", path)).body;
        return detail.status === "running" ? undefined : detail;
      },
      30_000,
      "the end of the execution",
    );
    expect(done.status).toBe("completed");
    expect(done.stall).toBeNull();
    expect(logged()).toHaveLength(1);
  });
});
