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

describe("search and bulk dead-letter actions", () => {
  let execution = "";
  let fileMessage = "";
  let correlation = "";
  const sections = () => `/queue/${execution}/docs.sections`;
  const dlqTotal = async () =>
    (await call(base, "GET", `/api/v1/queues/dlq?destination=${encodeURIComponent(sections())}&limit=1`)).body
      .total as number;

  beforeAll(async () => {
    execution = (await call(base, "POST", "/api/v1/executions", { config: "docs-ingest", input: {} })).body
      .id;
    await finished(execution);
    const row = (
      await call(base, "GET", `/api/v1/executions/${execution}/lineage?route=split&kind=message&limit=1`)
    ).body.items[0];
    fileMessage = row.message_id;
    correlation = row.correlation_id;
  }, 120_000);

  it("finds an execution by its id, a message by its id and a chain by its correlation id", async () => {
    const byExecution = (await call(base, "GET", `/api/v1/search?id=${execution}`)).body;
    expect(byExecution.execution.id).toBe(execution);
    expect(byExecution.messages).toEqual([]);

    const byMessage = (await call(base, "GET", `/api/v1/search?id=${fileMessage}`)).body;
    expect(byMessage.execution).toBeNull();
    expect(byMessage.messages).toEqual([
      expect.objectContaining({ execution_id: execution, message_id: fileMessage, status: "completed" }),
    ]);
    expect(byMessage.complete).toBe(true);

    // Every message of a chain carries the id of the message that started it.
    expect(correlation).not.toBe(fileMessage);
    const replay = (
      await call(base, "POST", `/api/v1/executions/${execution}/replay`, { from_route: "write" })
    ).body.id as string;
    await finished(replay);
    const byCorrelation = (await call(base, "GET", `/api/v1/search?id=${correlation}`)).body;
    expect(byCorrelation.messages.map((m: { execution_id: string }) => m.execution_id)).toEqual([execution]);
    expect(byCorrelation.replays.map((r: { id: string }) => r.id)).toEqual([replay]);

    const none = (await call(base, "GET", "/api/v1/search?id=no-such-id&scan=1")).body;
    expect(none).toMatchObject({ execution: null, messages: [], replays: [], scanned: 1, complete: false });
    expect((await call(base, "GET", "/api/v1/search?id=")).status).toBe(400);
    expect((await call(base, "GET", "/api/v1/search?id=x&scan=0")).status).toBe(400);
  });

  it("redrives and discards a selection of dead letters, reporting the ones not there", async () => {
    const before = await dlqTotal();
    expect(before).toBeGreaterThanOrEqual(3);
    const page = (
      await call(base, "GET", `/api/v1/queues/dlq?destination=${encodeURIComponent(sections())}&limit=3`)
    ).body.items as { message_id: string }[];
    const [a, b, c] = page.map((l) => l.message_id);
    const refused = await call(base, "POST", "/api/v1/queues/dlq/redrive-many", {
      destination: sections(),
      message_ids: [a, b],
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("execution_not_running");
    const redriven = await call(base, "POST", "/api/v1/queues/dlq/redrive-many", {
      destination: sections(),
      message_ids: [a, b],
      force: true,
    });
    expect(redriven.body).toEqual({ destination: sections(), redriven: [a, b], missing: [] });
    const discarded = await call(base, "POST", "/api/v1/queues/dlq/discard-many", {
      destination: sections(),
      message_ids: [c, a, "no-such-letter"],
    });
    expect(discarded.body).toEqual({
      destination: sections(),
      discarded: [c],
      missing: [a, "no-such-letter"],
    });
    expect(await dlqTotal()).toBe(before - 3);
    const empty = await call(base, "POST", "/api/v1/queues/dlq/discard-many", {
      destination: sections(),
      message_ids: [],
    });
    expect(empty.status).toBe(400);
  });
});
