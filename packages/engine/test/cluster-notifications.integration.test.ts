import { adapters as builtins } from "@factflow/adapters";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import {
  ClusterNotifications,
  ExecutionStore,
  type LineageDatabase,
  openLineageDatabase,
} from "@factflow/lineage";
import type { ExecutionRecord } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { createEngine, type Engine, loadPipelineConfig } from "../src/index.js";
import { memoryStorage } from "./harness.js";
import { postgresService } from "./postgres-service.js";

// Cluster discovery woken by PostgreSQL notifications (docs/deployment.md): with the fallback
// discovery interval at an hour, only the notification of a create can make a second server join.

const postgres = await postgresService("the cluster notification tests");
const postgresDown = postgres.down;
const required = postgres.required;
const postgresDatabase = () => postgres.database("factflow_engine_notify");

afterAll(async () => {
  await postgres.stop();
});

const yaml = `
name: notified
init: { route: split, message: { items: [] } }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in }
    adapters: [{ type: passthrough }]
`;

describe.skipIf(postgresDown !== undefined && !required)("cluster discovery woken by notifications", () => {
  it("a second server joins a new execution and stops with it without waiting for the discovery interval", async () => {
    if (postgresDown !== undefined) throw new Error(`PostgreSQL is required: ${postgresDown}`);
    const database = await postgresDatabase();
    const queue = createEmbeddedProvider({ mode: "memory" });
    await queue.connect();
    const databases: LineageDatabase[] = [];
    const engines: Engine[] = [];
    try {
      // What s1 saw start and end, through the engine's hooks: one promise per event and id,
      // made by whichever comes first, the hook or the test.
      const signals = new Map<string, { promise: Promise<string>; resolve: (value: string) => void }>();
      const signal = (key: string) => {
        let entry = signals.get(key);
        if (entry === undefined) {
          let resolve: (value: string) => void = () => {};
          const promise = new Promise<string>((done) => {
            resolve = done;
          });
          entry = { promise, resolve };
          signals.set(key, entry);
        }
        return entry;
      };
      for (let i = 0; i < 2; i++) {
        // A lineage database (its own connections) per server, as separate processes have.
        const db = await openLineageDatabase({ databaseUrl: database.url });
        databases.push(db);
        const engine = createEngine({
          queue,
          lineage: db.lineage,
          executions: db.executions,
          storage: memoryStorage(),
          adapters: builtins,
          strictLineage: true,
          ...(i === 1
            ? {
                hooks: {
                  onExecutionStarted: (record: ExecutionRecord) =>
                    signal(`started ${record.id}`).resolve("started"),
                  onExecutionEnded: (record: ExecutionRecord, end: string) =>
                    signal(`ended ${record.id}`).resolve(end),
                },
              }
            : {}),
          cluster: {
            nodeId: `s${i}`,
            store: (db.executions as ExecutionStore).cluster(),
            changes: new ClusterNotifications({ databaseUrl: database.url }),
            // Only a notification can make discovery run after the first pass.
            discoveryMs: 3_600_000,
          },
        });
        await engine.cluster?.start();
        engines.push(engine);
      }
      expect(databases[1]?.executions).toBeInstanceOf(ExecutionStore);
      const config = await loadPipelineConfig(yaml, { registry: engines[0]!.registry });
      const record = await engines[0]!.service.create({
        config,
        input: { items: Array.from({ length: 50 }, (_, n) => n) },
      });
      expect(await signal(`started ${record.id}`).promise).toBe("started");
      expect(await engines[0]!.service.waitForEnd(record.id, 120_000)).toBe("completed");
      // s1 stops with it too: woken by the notification of the end, or by its own completion check.
      expect(await signal(`ended ${record.id}`).promise).toBe("completed");
    } finally {
      for (const engine of engines) await engine.shutdown({ cancel: true });
      for (const db of databases) await db.close();
      await queue.close();
      await database.drop();
    }
  });
});
