import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, startTestServer, waitFor } from "./helpers.js";
import { createTestDatabase, DATABASE_URL, unreachable } from "./services.js";

// Starts over the concurrency cap (max_concurrent, 10 by default) are refused with 429 and leave
// nothing behind: every execution `GET /executions` lists is one a caller got a 201 for.

const PIPELINE = `
name: hold
init: { route: wait, message: { n: 1 } }
routes:
  wait:
    inbound: { queue: hold.in }
    adapters:
      - type: delay
        config: { ms: 600000 }
`;

const skipPostgres = (await unreachable("the start cap on PostgreSQL", [DATABASE_URL])) !== undefined;

const CASES = [
  { lineage: "embedded PGlite", skip: false, postgres: false },
  { lineage: "PostgreSQL", skip: skipPostgres, postgres: true },
] as const;

describe.each(CASES)("concurrent starts over the cap ($lineage)", ({ skip, postgres }) => {
  describe.skipIf(skip)("with its database", () => {
    let ctx: Awaited<ReturnType<typeof startTestServer>>;
    let database: Awaited<ReturnType<typeof createTestDatabase>> | undefined;

    beforeAll(async () => {
      if (postgres) database = await createTestDatabase("factflow_server_start_cap");
      ctx = await startTestServer(database === undefined ? {} : { database_url: database.url });
      const uploaded = await call(ctx.base, "POST", "/api/v1/configs/hold/versions", { source: PIPELINE });
      expect(uploaded.status).toBe(201);
    }, 120_000);

    afterAll(async () => {
      await ctx?.stop();
      await database?.drop();
    });

    it.each([30, 50])(
      "%i concurrent POST /executions: 10 × 201, the rest 429, and only the 201s exist",
      async (n) => {
        const answers = await Promise.all(
          Array.from({ length: n }, () => call(ctx.base, "POST", "/api/v1/executions", { config: "hold" })),
        );
        const created = answers.filter((a) => a.status === 201).map((a) => a.body.id as string);
        const refused = answers.filter((a) => a.status === 429);
        expect(
          answers.map((a) => a.status).filter((s) => s !== 201 && s !== 429),
          "only 201 and 429",
        ).toEqual([]);
        expect(created).toHaveLength(10);
        expect(refused).toHaveLength(n - 10);
        expect(refused[0]?.body.error.code).toBe("too_many_executions");

        const listed = await call(ctx.base, "GET", "/api/v1/executions?limit=500");
        const ids = (listed.body.items as { id: string; status: string; error?: string }[]).map((r) => r.id);
        expect(listed.body.total, JSON.stringify(listed.body.items.map((r: object) => r))).toBe(10);
        expect(ids.sort()).toEqual([...created].sort());

        // Free the slots for the next round: cancel what runs and wait until none does.
        for (const id of created) {
          const cancelled = await call(ctx.base, "POST", `/api/v1/executions/${id}/cancel`);
          expect(cancelled.body.status).toBe("cancelled");
        }
        await waitFor(
          async () => {
            const info = await call(ctx.base, "GET", "/api/v1/system/info");
            return info.body.executions_running === 0 ? true : undefined;
          },
          30_000,
          "the cancelled executions to stop",
        );
        // Cancelled rows stay listed: delete them so the next round counts only its own.
        const pruned = await call(ctx.base, "POST", "/api/v1/system/retention", { older_than_days: 0 });
        expect(pruned.body.deleted).toBe(10);
      },
      120_000,
    );
  });
});
