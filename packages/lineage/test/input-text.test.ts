import type { NewExecution, PipelineConfig } from "@factflow/protocols";
import { sql } from "kysely";
import { Migrator } from "kysely/migration";
import { describe, expect, it } from "vitest";
import { ExecutionStore, lineageMigrationProvider, uuidv7 } from "../src/index.js";
import { MIGRATION_LOCK_TABLE, MIGRATION_TABLE } from "../src/migrations.js";
import { migratedDialects } from "./migrated-targets.js";

const dialects = await migratedDialects("factflow-input-text");

const snapshot = {
  name: "inputs",
  init: { route: "split", message: {} },
  routes: { split: { inbound: { queue: "split.in" }, adapters: [{ type: "noop" }] } },
} as unknown as PipelineConfig;

function newExecution(input: NewExecution["input"]): NewExecution {
  return { id: uuidv7(), configName: "inputs", configVersion: null, configSnapshot: snapshot, input };
}

// Strings that change meaning if JSON text were mangled on the way: escapes, a quote, non-ASCII.
const input = {
  items: Array.from({ length: 500 }, (_, index) => ({ index, tag: `é"\\n${index}` })),
  nested: { flag: true, none: null, ratio: 0.25 },
};

describe.each(dialects)("execution inputs on $dialect", ({ open }) => {
  it("stores a new execution's input as JSON text and reads it back whole", async () => {
    const target = await open();
    try {
      const store = new ExecutionStore(target.handles.db);
      const created = await store.createExecution(newExecution(input));
      expect(created.input).toEqual(input);
      const none = await store.createExecution(newExecution(null));
      const stored = await sql<{ id: string; input: unknown; input_text: string | null }>`
        select id, input, input_text from pipeline_executions where id in (${created.id}, ${none.id})
      `.execute(target.handles.db);
      const byId = new Map(stored.rows.map((row) => [row.id, row]));
      // Not parsed into jsonb by the database: kept as the text it was given.
      expect(byId.get(created.id)).toMatchObject({ input: null, input_text: JSON.stringify(input) });
      expect(byId.get(none.id)).toMatchObject({ input: null, input_text: null });
      expect((await store.getExecution(created.id))?.input).toEqual(input);
      expect((await store.getExecution(none.id))?.input).toBeNull();
      // Text the caller serialised already is stored as it is, not serialised again.
      const given = await store.createExecution({ ...newExecution({ a: 1 }), inputText: '{"a": 1}' });
      const givenRow = await sql<{ input_text: string }>`
        select input_text from pipeline_executions where id = ${given.id}
      `.execute(target.handles.db);
      expect(givenRow.rows[0]?.input_text).toBe('{"a": 1}');
      expect((await store.getExecution(given.id))?.input).toEqual({ a: 1 });
      // Read for its status only: everything but the input.
      const statusOnly = await store.getExecution(created.id, { includeInput: false });
      expect(statusOnly).toEqual({ ...(await store.getExecution(created.id)), input: null });
      const listed = await store.listExecutions({ configName: "inputs" });
      expect(new Map(listed.items.map((e) => [e.id, e.input])).get(created.id)).toEqual(input);
      const bare = await store.listExecutions({ configName: "inputs", includeInput: false });
      expect(bare.items.map((e) => e.input)).toEqual([null, null, null]);
    } finally {
      await target.cleanup();
    }
  });

  it("keeps reading the jsonb input of an execution created before migration 0007", async () => {
    const target = await open();
    const db = target.handles.db;
    try {
      const migrator = new Migrator({
        db,
        provider: lineageMigrationProvider,
        migrationTableName: MIGRATION_TABLE,
        migrationLockTableName: MIGRATION_LOCK_TABLE,
      });
      // Back to the schema of 0006, as a database of an older release has it.
      expect((await migrator.migrateTo("0006_folded_invocations")).error).toBeUndefined();
      const old = uuidv7();
      await sql`insert into pipeline_executions (id, config_name, config_version, status, config_snapshot, input)
        values (${old}, 'inputs', null, 'completed', ${JSON.stringify(snapshot)}::jsonb,
          ${JSON.stringify(input)}::jsonb)`.execute(db);
      expect((await migrator.migrateToLatest()).error).toBeUndefined();
      const store = new ExecutionStore(db);
      expect((await store.getExecution(old))?.input).toEqual(input);
      const created = await store.createExecution(newExecution({ after: "migration" }));
      const listed = await store.listExecutions({ configName: "inputs", sort: "started", direction: "asc" });
      expect(listed.items.map((e) => [e.id, e.input])).toEqual([
        [old, input],
        [created.id, { after: "migration" }],
      ]);
    } finally {
      await target.cleanup();
    }
  });
});
