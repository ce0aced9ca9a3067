import { rmSync } from "node:fs";
import { join } from "node:path";
import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { type LineageDatabase, openLineageDatabase } from "@factflow/lineage";
import type { AdapterDefinition, LineageRow } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage, tempDir } from "./harness.js";
import { postgresService } from "./postgres-service.js";

// PostgreSQL and PGlite refuse U+0000 in text and jsonb. A pipeline whose adapters put one in a
// message body, in an emitted message and in an error must still leave every hop in lineage.

/** `nul_source` passes on a body with NULs; `nul_fail` rejects items holding one, with a NUL in its error. */
const nulAdapters: AdapterDefinition[] = [
  {
    type: "nul_source",
    description: "emits a body holding NUL characters",
    create: () => ({
      type: "nul_source",
      process: () => ({ data: { text: "a\u0000b", items: ["x\u0000", "y"] } }),
    }),
  },
  {
    type: "nul_fail",
    description: "rejects an item holding a NUL, with the NUL in its error",
    create: () => ({
      type: "nul_fail",
      process: (ctx) =>
        typeof ctx.message === "string" && ctx.message.includes("\u0000")
          ? { data: null, error: `refused ${ctx.message}`, retryable: false }
          : { data: ctx.message },
    }),
  },
];

const config = `
name: nul
init: { route: start, message: {} }
routes:
  start:
    inbound: { queue: start.in }
    adapters: [{ type: nul_source }]
    outbound: [relay.in]
  relay:
    inbound: { queue: relay.in }
    adapters: [{ type: split, config: { field: items } }]
    outbound: [check.in]
  check:
    inbound: { queue: check.in }
    adapters: [{ type: nul_fail }]
`;

const postgres = await postgresService("the PostgreSQL case of lineage-nul");
const postgresDown = postgres.down;
const required = postgres.required;
const postgresDatabase = () => postgres.database("factflow_engine_nul");

afterAll(async () => {
  await postgres.stop();
});

const targets = [
  { name: "PGlite", skip: false },
  { name: "PostgreSQL", skip: postgresDown !== undefined && !required },
] as const;

describe.each(targets)("NUL characters in lineage ($name)", ({ name, skip }) => {
  it.skipIf(skip).each([false, true])(
    "stores every hop, escaped and flagged (strict lineage: %s)",
    async (strictLineage) => {
      if (name === "PostgreSQL" && postgresDown !== undefined)
        throw new Error(`PostgreSQL is required (FACTFLOW_REQUIRE_SERVICES=1): ${postgresDown}`);
      const dir = tempDir();
      const database = name === "PostgreSQL" ? await postgresDatabase() : undefined;
      let db: LineageDatabase | undefined;
      const queue = createEmbeddedProvider({ mode: "memory" });
      try {
        db = await openLineageDatabase(
          database === undefined ? { dataDir: join(dir, "db") } : { databaseUrl: database.url },
        );
        await queue.connect();
        const engine = createEngine({
          queue,
          lineage: db.lineage,
          executions: db.executions,
          storage: memoryStorage(),
          adapters: [...builtins, ...nulAdapters],
          strictLineage,
        });
        try {
          const loaded = await loadPipelineConfig(config, { registry: engine.registry });
          const { id } = await engine.service.create({ config: loaded });
          expect(await engine.service.waitForEnd(id, 60_000)).toBe("completed");
          await db.lineage.flush();
          expect(db.lineage.counters().lost).toBe(0);

          const rows = (await db.lineage.rows(id, { limit: 1000 })).items;
          const messages = (route: string) => rows.filter((r) => r.kind === "message" && r.route === route);
          // The relay's input, recorded (or registered, with strict lineage) by `start`.
          const relay = messages("relay");
          expect(relay).toHaveLength(1);
          expect(relay[0]).toMatchObject({
            status: "completed",
            payload: { text: "a\\u0000b", items: ["x\\u0000", "y"] },
            sanitised: ["payload"],
          });
          // The fan-out children, registered durably before their publish.
          const checked = messages("check").sort((a, b) =>
            String(a.payload).localeCompare(String(b.payload)),
          );
          expect(checked.map((r) => [r.payload, r.status, r.sanitised])).toEqual([
            ["x\\u0000", "failed", ["error", "payload"]],
            ["y", "completed", undefined],
          ]);
          expect((checked[0] as LineageRow).error?.message).toBe("refused x\\u0000");
          const failedAdapter = rows.filter((r) => r.kind === "adapter" && r.status === "failed");
          expect(failedAdapter.map((r) => [r.route, r.error?.message, r.sanitised])).toEqual([
            ["check", "refused x\\u0000", ["error"]],
          ]);
          // Every hop is there: one adapter row per adapter invocation, one message row per message.
          expect(rows.filter((r) => r.kind === "adapter")).toHaveLength(4);
          expect(rows.filter((r) => r.kind === "message")).toHaveLength(4);
        } finally {
          await engine.shutdown();
        }
      } finally {
        await queue.close();
        await db?.close();
        await database?.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
