import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, startTestServer } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "factflow-degraded-"));
const dataDir = join(dir, "data");
let ctx: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  // A queue log with a flipped byte in both copies of one publish record in the middle of it.
  // Where the server keeps its queue log under its data directory.
  const provider = createEmbeddedProvider({ mode: "file", dataDir: join(dataDir, "queue") });
  await provider.connect();
  for (let i = 0; i < 10; i++) await provider.publish("/queue/leftover", { body: { text: `item-${i}` } });
  await provider.close();
  const log = join(dataDir, "queue", "queue.log");
  const data = readFileSync(log);
  const first = data.indexOf("item-4");
  for (const at of [first + 2, data.indexOf("item-4", first + 1) + 2]) data[at] = (data[at] ?? 0) ^ 0xff;
  writeFileSync(log, data);
  ctx = await startTestServer({ data_dir: dataDir });
});
afterAll(async () => {
  await ctx?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a server whose queue log was damaged", () => {
  it("says so in /readyz (degraded, with the reason), a metric and the API, and keeps serving", async () => {
    const ready = await call(ctx.base, "GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.status).toBe("degraded");
    expect(ready.body.problems[0]).toMatch(
      /queue log was damaged in 1 place\(s\) \(CRC mismatch\).* 0 of the places from the record's intact copy/,
    );
    const metrics = await call(ctx.base, "GET", "/metrics");
    expect(metrics.text).toContain('factflow_provider_problems{provider="embedded"} 1');
    const info = await call(ctx.base, "GET", "/api/v1/system/info");
    expect(info.body.provider_problems).toHaveLength(1);
    const stats = await call(ctx.base, "GET", "/api/v1/queues/stats?destination=/queue/leftover");
    expect(stats.body.depth).toBe(9);
  });
});
