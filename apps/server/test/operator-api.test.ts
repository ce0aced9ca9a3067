import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, startTestServer, waitFor } from "./helpers.js";

// What the web console asks the API beyond the basics: which executions this server runs.
let ctx: Awaited<ReturnType<typeof startTestServer>>;
let base: string;

const SLOW = `
name: slow
init: { route: wait }
routes:
  wait:
    inbound: { queue: slow.in }
    adapters:
      - type: delay
        config: { ms: 60000 }
`;

beforeAll(async () => {
  ctx = await startTestServer();
  base = ctx.base;
}, 120_000);

afterAll(async () => {
  await ctx?.stop();
});

async function finished(id: string): Promise<void> {
  await waitFor(
    async () =>
      (await call(base, "GET", `/api/v1/executions/${id}`)).body.status === "running" ? undefined : true,
    60_000,
    `execution ${id} to finish`,
  );
}

describe("system info", () => {
  it("lists the executions this server runs, so resume is offered only for the others", async () => {
    expect((await call(base, "POST", "/api/v1/configs/slow/versions", { source: SLOW })).status).toBe(201);
    const slow = (await call(base, "POST", "/api/v1/executions", { config: "slow" })).body.id as string;
    const info = (await call(base, "GET", "/api/v1/system/info")).body;
    expect(info.executions_running_here).toEqual([slow]);
    expect(info.executions_running).toBe(1);
    await call(base, "POST", `/api/v1/executions/${slow}/cancel`, {});
    await finished(slow);
    expect((await call(base, "GET", "/api/v1/system/info")).body.executions_running_here).toEqual([]);
  });
});
