import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createApp } from "../src/app.js";
import { OPERATIONS } from "../src/openapi.js";
import {
  call,
  EXAMPLE_DIR,
  readSse,
  SAMPLE_DOCS,
  sectionsInArtefacts,
  startTestServer,
  waitFor,
} from "./helpers.js";

// One server (PGlite cold start is slow) with max_concurrent 1, driven over real HTTP.
let ctx: Awaited<ReturnType<typeof startTestServer>>;
let base: string;

const SLOW_CONFIG = `
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
  ctx = await startTestServer({ max_concurrent: 1, body_limit_bytes: 64 * 1024 });
  base = ctx.base;
}, 120_000);

afterAll(async () => {
  await ctx?.stop();
});

async function runDocsIngest(): Promise<string> {
  const created = await call(base, "POST", "/api/v1/executions", {
    config: "docs-ingest",
    input: { roots: [SAMPLE_DOCS] },
  });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ status: "running" });
  return created.body.id as string;
}

describe("system endpoints", () => {
  it("answers health, readiness and metrics", async () => {
    expect((await call(base, "GET", "/healthz")).body).toEqual({ status: "ok" });
    const ready = await call(base, "GET", "/readyz");
    expect(ready.status).toBe(200);
    expect(ready.body.checks).toEqual({ provider: "ok", database: "ok" });
    const metrics = await call(base, "GET", "/metrics");
    expect(metrics.headers.get("content-type")).toContain("text/plain");
    expect(metrics.text).toContain("# TYPE factflow_messages_total counter");
    expect(metrics.text).toContain("factflow_lineage_write_failures_total 0");
  });

  it("serves an OpenAPI document listing every route of the app", async () => {
    const doc = await call(base, "GET", "/api/v1/openapi.json");
    expect(doc.body.openapi).toBe("3.1.0");
    const app = createApp(ctx.server.runtime);
    const registered = app.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:(\w+)/g, "{$1}")}`);
    const documented = new Set(OPERATIONS.map((o) => `${o.method} ${o.path}`));
    expect(registered.filter((r) => !documented.has(r))).toEqual([]);
    for (const op of OPERATIONS) expect(doc.body.paths[op.path]?.[op.method]).toBeDefined();
  });
});

describe("errors", () => {
  it("requires the bearer token on mutating routes only", async () => {
    const denied = await call(base, "POST", "/api/v1/executions", { config: "docs-ingest" }, { auth: false });
    expect(denied.status).toBe(401);
    expect(denied.body.error.code).toBe("unauthorized");
    expect(denied.headers.get("www-authenticate")).toContain("Bearer");
    const wrong = await fetch(`${base}/api/v1/executions`, {
      method: "POST",
      headers: { authorization: "Bearer nope" },
      body: "{}",
    });
    expect(wrong.status).toBe(401);
    expect((await call(base, "GET", "/api/v1/executions", undefined, { auth: false })).status).toBe(200);
  });

  it("answers 400 to bad JSON and invalid bodies", async () => {
    const bad = await call(base, "POST", "/api/v1/executions", undefined, { raw: "{not json" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("bad_json");
    const invalid = await call(base, "POST", "/api/v1/executions", { config: 42 });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error.code).toBe("invalid_request");
    expect(invalid.body.error.issues[0].path).toBe("config");
    const unknown = await call(base, "POST", "/api/v1/executions", { config: "x", bogus: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error.issues).toEqual([
      { path: "bogus", message: 'unknown key "bogus"; see docs/http-api.md for the accepted fields' },
    ]);
    const missing = await call(base, "GET", "/api/v1/queues/dlq");
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toBe("query is invalid: destination: is required");
  });

  it("answers 404 to an unknown config, execution and route", async () => {
    const config = await call(base, "POST", "/api/v1/executions", { config: "no-such-config" });
    expect(config.status).toBe(404);
    expect(config.body.error.code).toBe("config_not_found");
    expect(config.body.error.message).toContain("no-such-config");
    const execution = await call(base, "GET", "/api/v1/executions/00000000-0000-7000-8000-000000000000");
    expect(execution.status).toBe(404);
    expect(execution.body.error.code).toBe("execution_not_found");
    const route = await call(base, "GET", "/api/v1/nope");
    expect(route.status).toBe(404);
    expect(route.body.error.code).toBe("route_not_found");
  });

  it("answers 413 to a body over the limit", async () => {
    const big = await call(base, "POST", "/api/v1/executions", {
      config: "docs-ingest",
      input: { pad: "x".repeat(100 * 1024) },
    });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe("payload_too_large");
  });
});

describe("configs", () => {
  it("lists the config directory and validates YAML with paths", async () => {
    const list = await call(base, "GET", "/api/v1/configs");
    expect(list.body.items.map((c: { name: string }) => c.name)).toContain("docs-ingest");
    const one = await call(base, "GET", "/api/v1/configs/docs-ingest");
    expect(one.body.config.routes.enrich.inbound.queue).toBe("docs.sections");
    const invalid = await call(base, "POST", "/api/v1/configs/validate", undefined, {
      raw: "name: broken\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: q }\n    adapters: []\n",
      contentType: "application/yaml",
    });
    expect(invalid.status).toBe(200);
    expect(invalid.body.valid).toBe(false);
    expect(invalid.body.issues.some((i: { path: string }) => i.path.includes("routes.a.adapters"))).toBe(
      true,
    );
  });

  it("uploads versions and rejects an invalid one with 422", async () => {
    const first = await call(base, "POST", "/api/v1/configs/slow/versions", { source: SLOW_CONFIG });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ name: "slow", version: 1 });
    const second = await call(base, "POST", "/api/v1/configs/slow/versions", undefined, {
      raw: SLOW_CONFIG,
      contentType: "application/yaml",
    });
    expect(second.body.version).toBe(2);
    const mismatch = await call(base, "POST", "/api/v1/configs/other/versions", { source: SLOW_CONFIG });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.error.code).toBe("config_invalid");
    expect(mismatch.body.error.issues[0].path).toBe("name");
    // The sender's YAML is no file on the server: errors call it uploaded and show no server path.
    const broken = await call(base, "POST", "/api/v1/configs/broken/versions", undefined, {
      raw: "name: broken\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: q }\n    adapters: [{ type: nosuch }]\n",
      contentType: "application/yaml",
    });
    expect(broken.status).toBe(422);
    expect(broken.body.error.message).toContain('pipeline config "(uploaded)" is invalid');
    expect(broken.body.error.message).not.toContain(EXAMPLE_DIR);
    expect(broken.body.error.message).toContain('unknown adapter "nosuch"');
  });
});

describe("executions", () => {
  let id: string;

  it("answers 429 beyond max_concurrent, and cancels", async () => {
    const slow = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(slow.status).toBe(201);
    const over = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe("too_many_executions");
    const cancelled = await call(base, "POST", `/api/v1/executions/${slow.body.id}/cancel`);
    expect(cancelled.body).toMatchObject({ status: "cancelled", cancelled: true });
  });

  it("purges a queue: refused (409) while its execution runs unless forced, allowed once it is over", async () => {
    if ((await call(base, "GET", "/api/v1/configs/slow")).status === 404)
      await call(base, "POST", "/api/v1/configs/slow/versions", { source: SLOW_CONFIG });
    const slow = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(slow.status).toBe(201);
    const destination = `/queue/${slow.body.id}/slow.in`;
    const refused = await call(base, "POST", "/api/v1/queues/purge", { destination });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("execution_running");
    expect(refused.body.error.message).toContain("force");
    const forced = await call(base, "POST", "/api/v1/queues/purge", { destination, force: true });
    expect(forced.status).toBe(200);
    expect(forced.body).toMatchObject({ destination, purged: expect.any(Number) });
    await call(base, "POST", `/api/v1/executions/${slow.body.id}/cancel`);
    const after = await call(base, "POST", "/api/v1/queues/purge", { destination });
    expect(after.status).toBe(200);
    const unknown = await call(base, "POST", "/api/v1/queues/purge", {
      destination: "/queue/never-used-here",
    });
    expect(unknown.body).toMatchObject({ purged: 0, reason: expect.any(String) });
    const bad = await call(base, "POST", "/api/v1/queues/purge", { destination: "nowhere" });
    expect(bad.status).toBe(400);
  });

  it("runs the example and streams its events to completion over SSE", async () => {
    id = await runDocsIngest();
    const events = await readSse(`${base}/api/v1/executions/${id}/events`);
    const types = events.map((e) => e.event);
    expect(types[0]).toBe("started");
    expect(types).toContain("route_progress");
    expect(types.at(-1)).toBe("completed");
    const ids = events.map((e) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    // Reconnecting with Last-Event-ID replays only what came after it.
    const middle = events[Math.floor(events.length / 2)]?.id ?? "1";
    const again = await readSse(`${base}/api/v1/executions/${id}/events`, middle);
    expect(again.map((e) => Number(e.id)).every((n) => n > Number(middle))).toBe(true);
    expect(again.at(-1)?.event).toBe("completed");
  });

  it("lists with filters and paging, and shows per-route counts", async () => {
    const list = await call(base, "GET", "/api/v1/executions?status=completed&config=docs-ingest&limit=1");
    expect(list.body.total).toBeGreaterThanOrEqual(1);
    expect(list.body.items).toHaveLength(1);
    const resume = await call(base, "POST", `/api/v1/executions/${id}/resume`);
    expect(resume.status).toBe(400);
    expect(resume.body.error.message).toContain("is completed");
    const badStatus = await call(base, "GET", "/api/v1/executions?status=weird");
    expect(badStatus.status).toBe(400);
    const one = await call(base, "GET", `/api/v1/executions/${id}`);
    expect(one.body.status).toBe("completed");
    // 3 sample files, 13 sections, 1 always fails; the 12 others are batched (by 8, or fewer on a
    // timed flush, so the number of batches depends on timing) and all written.
    expect(one.body.routes.discover.messages.completed).toBe(1);
    expect(one.body.routes.split.messages.completed).toBe(3);
    expect(
      Object.values(one.body.routes.enrich.messages as Record<string, number>).reduce((a, b) => a + b, 0),
    ).toBe(13);
    expect(one.body.routes.batch.messages.completed).toBe(12);
    expect(one.body.routes.write.messages.completed).toBeGreaterThanOrEqual(2);
    expect(await sectionsInArtefacts(ctx.server, id)).toBe(12);
  });

  it("sorts executions by duration and status and limits them to a start range", async () => {
    // The executions of the tests above: the example's run (completed) and cancelled slow ones.
    const first = id;
    const all = (await call(base, "GET", "/api/v1/executions?limit=500")).body.items as {
      id: string;
      status: string;
      created_at: string;
      finished_at: string | null;
    }[];
    const ms = (e: (typeof all)[number]) =>
      Date.parse(e.finished_at ?? new Date().toISOString()) - Date.parse(e.created_at);
    const byDuration = (await call(base, "GET", "/api/v1/executions?sort=duration&order=asc&limit=500")).body;
    expect(byDuration.total).toBe(all.length);
    const durations = (byDuration.items as typeof all).map(ms);
    expect(durations).toEqual([...durations].sort((a, b) => a - b));
    const rank = ["running", "failed", "cancelled", "completed"];
    const byStatus = (await call(base, "GET", "/api/v1/executions?sort=status&order=asc&limit=500")).body;
    const ranks = (byStatus.items as typeof all).map((e) => rank.indexOf(e.status));
    expect(ranks).toEqual([...ranks].sort((a, b) => a - b));

    const created = all.find((e) => e.id === first)?.created_at as string;
    const from = await call(base, "GET", `/api/v1/executions?from=${encodeURIComponent(created)}&order=asc`);
    expect(from.body.items[0].id).toBe(first);
    const before = await call(base, "GET", `/api/v1/executions?to=${encodeURIComponent(created)}&limit=500`);
    expect(before.body.items.map((e: { id: string }) => e.id)).not.toContain(first);
    expect(before.body.total + from.body.total).toBe(all.length);
    for (const bad of ["from=yesterday", "to=2026-01-01T00:00:00", "sort=name", "order=up"]) {
      const refused = await call(base, "GET", `/api/v1/executions?${bad}`);
      expect(refused.status).toBe(400);
    }
  });

  it("pages and filters lineage, and returns the tree of one message", async () => {
    const page = await call(base, "GET", `/api/v1/executions/${id}/lineage?limit=5`);
    expect(page.body.items).toHaveLength(5);
    expect(page.body.total).toBeGreaterThan(5);
    const failed = await call(
      base,
      "GET",
      `/api/v1/executions/${id}/lineage?route=enrich&status=failed&kind=adapter`,
    );
    expect(failed.body.total).toBeGreaterThanOrEqual(3);
    const messageId = failed.body.items[0].message_id as string;
    const tree = await call(base, "GET", `/api/v1/executions/${id}/lineage/${messageId}`);
    expect(tree.status).toBe(200);
    expect(tree.body.items.some((r: { route: string }) => r.route === "split")).toBe(true);
    // Every ancestor up to the root: the file message and the init message on `discover`.
    const messages = (tree.body.items as { kind: string; route: string }[]).filter(
      (r) => r.kind === "message",
    );
    expect(messages.map((r) => r.route)).toEqual(expect.arrayContaining(["discover", "split", "enrich"]));
    // A batch message's tree goes back to the root as well.
    const batch = await call(
      base,
      "GET",
      `/api/v1/executions/${id}/lineage?route=batch&kind=message&limit=1`,
    );
    const batchTree = await call(
      base,
      "GET",
      `/api/v1/executions/${id}/lineage/${batch.body.items[0].message_id}`,
    );
    expect(
      (batchTree.body.items as { kind: string; route: string }[])
        .filter((r) => r.kind === "message")
        .map((r) => r.route),
    ).toEqual(expect.arrayContaining(["discover", "split", "enrich", "batch"]));
  });

  it("bounds the tree of one message with ?limit= and says when it is truncated", async () => {
    const root = await call(
      base,
      "GET",
      `/api/v1/executions/${id}/lineage?route=discover&kind=message&limit=1`,
    );
    const rootId = root.body.items[0].message_id as string;
    const path = `/api/v1/executions/${id}/lineage/${rootId}`;
    const whole = await call(base, "GET", path);
    expect(whole.status).toBe(200);
    expect(whole.body).toMatchObject({ limit: 5000, truncated: false });
    const size = (whole.body.items as unknown[]).length;
    const rootRows = (whole.body.items as { message_id: string }[]).filter((r) => r.message_id === rootId);
    expect(size).toBeGreaterThan(rootRows.length + 1);

    const cut = await call(base, "GET", `${path}?limit=${size - 1}`);
    expect(cut.status).toBe(200);
    expect(cut.body).toMatchObject({ limit: size - 1, truncated: true });
    expect(cut.body.items).toHaveLength(size - 1);
    // The message's own rows are always in.
    expect(cut.body.items).toEqual(expect.arrayContaining(rootRows));
    const exact = await call(base, "GET", `${path}?limit=${size}`);
    expect(exact.body).toMatchObject({ truncated: false });
    expect(exact.body.items).toHaveLength(size);
    expect((await call(base, "GET", `${path}?limit=20000`)).status).toBe(200);

    for (const bad of ["0", "20001", "ten", "-1"]) {
      const refused = await call(base, "GET", `${path}?limit=${bad}`);
      expect(refused.status).toBe(400);
    }
  });

  it("browses, redrives and discards dead letters through the provider admin", async () => {
    const destination = `/queue/${id}/docs.sections`;
    const q = new URLSearchParams({ destination }).toString();
    const dlq = await call(base, "GET", `/api/v1/queues/dlq?${q}`);
    expect(dlq.body.total).toBe(1);
    const letter = dlq.body.items[0];
    expect(letter.attempts).toBe(3);
    expect(letter.last_error).toContain("simulated outage");
    const queues = await call(base, "GET", "/api/v1/queues");
    expect(queues.body.items.some((d: { destination: string }) => d.destination === destination)).toBe(true);

    // The execution is over: redriving into its queues would strand the messages, so it is refused
    // with a pointer to replay, unless forced.
    const refusedOne = await call(base, "POST", "/api/v1/queues/dlq/redrive-one", {
      destination,
      message_id: letter.message_id,
    });
    expect(refusedOne.status).toBe(409);
    expect(refusedOne.body.error.code).toBe("execution_not_running");
    expect(refusedOne.body.error.message).toContain(`/executions/${id}/replay`);
    expect(refusedOne.body.error.message).toContain("force");
    const refusedAll = await call(base, "POST", "/api/v1/queues/dlq/redrive", { destination });
    expect(refusedAll.status).toBe(409);
    expect(refusedAll.body.error.code).toBe("execution_not_running");
    const stillThere = await call(base, "GET", `/api/v1/queues/stats?${q}`);
    expect(stillThere.body).toMatchObject({ depth: 0, dlq_depth: 1 });

    const one = await call(base, "POST", "/api/v1/queues/dlq/redrive-one", {
      destination,
      message_id: letter.message_id,
      force: true,
    });
    expect(one.status).toBe(200);
    expect(one.body.redriven).toBe(true);
    const stats = await call(base, "GET", `/api/v1/queues/stats?${q}`);
    expect(stats.body).toMatchObject({ depth: 1, dlq_depth: 0 });
    const missing = await call(base, "POST", "/api/v1/queues/dlq/discard", {
      destination,
      message_id: letter.message_id,
    });
    expect(missing.status).toBe(404);
    const redriveAll = await call(base, "POST", "/api/v1/queues/dlq/redrive", { destination, force: true });
    expect(redriveAll.body.redriven).toBe(0);
    const badDestination = await call(base, "GET", "/api/v1/queues/dlq?destination=nope");
    expect(badDestination.status).toBe(400);
  });

  it("discards an existing dead letter, and redrives unscoped queues without force", async () => {
    // A dead letter on a queue no execution owns, made through the real provider.
    const destination = `/queue/fftest-discard-${Math.random().toString(36).slice(2, 8)}`;
    const q = new URLSearchParams({ destination }).toString();
    const { provider } = ctx.server.runtime;
    const sub = await provider.subscribe(destination, () => "REJECTED", { subscription: "discard-test" });
    try {
      for (const n of [1, 2]) await provider.publish(destination, { body: { n } });
      const page = await waitFor(
        async () => {
          const r = await call(base, "GET", `/api/v1/queues/dlq?${q}`);
          return r.body.total === 2 ? r.body : undefined;
        },
        20_000,
        "two dead letters",
      );
      const [first, second] = page.items as { message_id: string }[];
      const discarded = await call(base, "POST", "/api/v1/queues/dlq/discard", {
        destination,
        message_id: first?.message_id,
      });
      expect(discarded.status).toBe(200);
      expect(discarded.body).toEqual({ destination, message_id: first?.message_id, discarded: true });
      const after = await call(base, "GET", `/api/v1/queues/dlq?${q}`);
      expect(after.body.total).toBe(1);
      expect(after.body.items[0].message_id).toBe(second?.message_id);
      // Not owned by an execution: no refusal.
      const redrive = await call(base, "POST", "/api/v1/queues/dlq/redrive-one", {
        destination,
        message_id: second?.message_id,
      });
      expect(redrive.status).toBe(200);
      expect(redrive.body.redriven).toBe(true);
    } finally {
      await sub.unsubscribe();
      await provider.admin.deleteDestination({ destination }, { keepDeadLetters: false });
    }
  });

  it("redrives the queues of a running execution, and shows its handlers in flight", async () => {
    const slow = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(slow.status).toBe(201);
    try {
      await waitFor(
        async () => {
          const text = (await call(base, "GET", "/metrics")).text;
          return /^factflow_messages_in_flight\{route="wait"\} 1$/m.test(text) ? true : undefined;
        },
        20_000,
        "the slow handler in flight",
      );
      const redrive = await call(base, "POST", "/api/v1/queues/dlq/redrive", {
        destination: `/queue/${slow.body.id}/slow.in`,
      });
      expect(redrive.status).toBe(200);
      expect(redrive.body.redriven).toBe(0);
    } finally {
      await call(base, "POST", `/api/v1/executions/${slow.body.id}/cancel`);
      await waitFor(async () => {
        const r = await call(base, "GET", `/api/v1/executions/${slow.body.id}`);
        return r.body.status === "running" ? undefined : true;
      });
    }
  });

  it("replays a segment as a new linked execution", async () => {
    const sections = await call(
      base,
      "GET",
      `/api/v1/executions/${id}/lineage?route=enrich&kind=message&status=completed&limit=2`,
    );
    const messageIds = sections.body.items.map((r: { message_id: string }) => r.message_id);
    const replay = await call(base, "POST", `/api/v1/executions/${id}/replay`, {
      from_route: "enrich",
      message_ids: messageIds,
    });
    expect(replay.status).toBe(201);
    expect(replay.body.parent_execution_id).toBe(id);
    const done = await waitFor(async () => {
      const r = await call(base, "GET", `/api/v1/executions/${replay.body.id}`);
      return r.body.status === "running" ? undefined : r.body;
    });
    expect(done).toMatchObject({ status: "completed", parent_execution_id: id, replay_from_route: "enrich" });
    expect(done.routes.discover).toBeUndefined();
    expect(done.routes.enrich.messages.completed).toBe(2);
    const unknownRoute = await call(base, "POST", `/api/v1/executions/${id}/replay`, { from_route: "nope" });
    expect(unknownRoute.status).toBe(400);
    const unknownIds = await call(base, "POST", `/api/v1/executions/${id}/replay`, {
      from_route: "enrich",
      message_ids: [...messageIds, "no-such-message"],
    });
    expect(unknownIds.status).toBe(400);
    expect(unknownIds.body.error.message).toContain("no-such-message");
  });

  it("refuses to replay an execution that has not ended (409), as redrive does", async () => {
    const started = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(started.status).toBe(201);
    try {
      const refused = await call(base, "POST", `/api/v1/executions/${started.body.id}/replay`, {
        from_route: "wait",
      });
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({ code: "execution_not_running" });
      expect(refused.body.error.message).toMatch(/still running/);
    } finally {
      await call(base, "POST", `/api/v1/executions/${started.body.id}/cancel`);
    }
  });

  it("counts messages, retries and dead letters in /metrics", async () => {
    const text = (await call(base, "GET", "/metrics")).text;
    expect(text).toMatch(
      /factflow_messages_total\{queue="docs.sections",route="enrich",status="FAILED"\} [1-9]/,
    );
    expect(text).toMatch(/factflow_dead_letters_total\{route="enrich"\} 1/);
    expect(text).toMatch(/factflow_retries_total\{route="enrich"\} [1-9]/);
    expect(text).toMatch(/factflow_executions_total\{status="completed"\} [1-9]/);
    expect(text).toMatch(/factflow_execution_completion_seconds_count [1-9]/);
    // Every handler of the example has finished; the gauge is back to 0 per route.
    expect(text).toContain("# TYPE factflow_messages_in_flight gauge");
    expect(text).toMatch(/^factflow_messages_in_flight\{route="enrich"\} 0$/m);
    expect(text).toContain("# TYPE factflow_lineage_write_failures_total counter");
    expect(text).toMatch(/^factflow_lineage_write_failures_total 0$/m);
  });

  it("serves the provider and lineage durability counters", async () => {
    const counters = await call(base, "GET", "/api/v1/queues/counters");
    expect(counters.status).toBe(200);
    expect(counters.body.provider).toBe("embedded");
    for (const key of ["published", "confirmed", "acked", "retried", "deadLettered", "lost"])
      expect(typeof counters.body.durability[key]).toBe("number");
    expect(counters.body.durability.published).toBeGreaterThan(0);
    expect(counters.body.durability.deadLettered).toBeGreaterThan(0);
    expect(counters.body.durability.lost).toBe(0);
    expect(counters.body.lineage).toMatchObject({ lost: 0 });
    expect(counters.body.lineage.written).toBeGreaterThan(0);
  });

  it("runs the MQ diagnostic on every route of every config", async () => {
    const result = await call(base, "POST", "/api/v1/system/mq-diagnostic");
    expect(result.status).toBe(200);
    // docs-ingest has 5 routes, slow has 1.
    expect(result.body.lines).toHaveLength(6);
    expect(result.body.lines.every((l: string) => l.startsWith("ok"))).toBe(true);
  });
});

// Last: it deletes the executions the tests above inspect.
describe("retention", () => {
  it("deletes finished executions with their lineage on demand, keeping running ones", async () => {
    const noToken = await call(
      base,
      "POST",
      "/api/v1/system/retention",
      { older_than_days: 0 },
      { auth: false },
    );
    expect(noToken.status).toBe(401);
    const negative = await call(base, "POST", "/api/v1/system/retention", { older_than_days: -1 });
    expect(negative.status).toBe(400);
    expect((await call(base, "POST", "/api/v1/system/retention", {})).status).toBe(400);

    const { items } = (await call(base, "GET", "/api/v1/executions?status=completed&limit=1")).body;
    const oldId = items[0].id as string;
    expect((await ctx.server.runtime.lineage.rows(oldId, { limit: 1 })).total).toBeGreaterThan(0);
    const slow = await call(base, "POST", "/api/v1/executions", { config: "slow" });
    expect(slow.status).toBe(201);
    try {
      const young = await call(base, "POST", "/api/v1/system/retention", { older_than_days: 1 });
      expect(young.status).toBe(200);
      expect(young.body).toMatchObject({ older_than_days: 1, deleted: 0, scheduled_retention_days: 0 });
      const all = await call(base, "POST", "/api/v1/system/retention", { older_than_days: 0 });
      expect(all.status).toBe(200);
      expect(all.body.deleted).toBeGreaterThanOrEqual(3);
      expect((await call(base, "GET", `/api/v1/executions/${oldId}`)).status).toBe(404);
      expect((await ctx.server.runtime.lineage.rows(oldId, { limit: 1 })).total).toBe(0);
      const running = await call(base, "GET", `/api/v1/executions/${slow.body.id}`);
      expect(running.body.status).toBe("running");
      const text = (await call(base, "GET", "/metrics")).text;
      expect(text).toMatch(/factflow_retention_runs_total\{outcome="ok",trigger="request"\} 2/);
    } finally {
      await call(base, "POST", `/api/v1/executions/${slow.body.id}/cancel`);
    }
  });
});
