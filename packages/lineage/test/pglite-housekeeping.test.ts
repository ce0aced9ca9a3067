import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandles } from "../src/database-handles.js";
import { connectPglite } from "../src/pglite.js";

// PGlite runs PostgreSQL in single-user mode: no checkpointer, no autovacuum. The writer's channel
// vacuums and checkpoints itself, by the volume it sent as well as by its number of commits, so a
// busy writer (few, large batches) cannot fill the write-ahead log far past its cap.

const dir = mkdtempSync(join(tmpdir(), "factflow-housekeeping-"));
let handles: DatabaseHandles;

/** The redo position of the last checkpoint: it moves when one runs. */
async function lastCheckpoint(): Promise<string> {
  const result = await sql<{
    lsn: string;
  }>`select redo_lsn::text as lsn from pg_control_checkpoint()`.execute(handles.db);
  return result.rows[0]?.lsn ?? "";
}

/** About 1 MB of CSV rows for a scratch `lineage` table. */
function megabyteOfRows(from: number): string {
  const filler = "x".repeat(1000);
  let csv = "";
  for (let i = 0; i < 1024; i++) csv += `${from + i},${filler}\n`;
  return csv;
}

beforeAll(async () => {
  handles = await connectPglite(dir);
  // A table of the name the channel vacuums; the channel itself copies whatever it is given.
  await sql`create table lineage (id integer primary key, body text)`.execute(handles.db);
});

afterAll(async () => {
  await handles?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the PGlite writer channel's housekeeping", () => {
  it("checkpoints after a few megabytes even when they came in a handful of commits", async () => {
    const copy = handles.writer.copy;
    expect(copy).toBeDefined();
    const start = await lastCheckpoint();
    await handles.writer.copy?.(
      "copy lineage (id, body) from '/dev/blob' with (format csv)",
      megabyteOfRows(0),
    );
    // One megabyte in one commit: far from either threshold, no checkpoint yet.
    expect(await lastCheckpoint()).toBe(start);
    for (let i = 1; i <= 4; i++) {
      await handles.writer.copy?.(
        "copy lineage (id, body) from '/dev/blob' with (format csv)",
        megabyteOfRows(i * 1024),
      );
    }
    // Five commits, five megabytes: the volume threshold (4 MB) ran a vacuum and a checkpoint.
    expect(await lastCheckpoint()).not.toBe(start);
    const rows = await sql<{ n: number }>`select count(*)::int as n from lineage`.execute(handles.db);
    expect(rows.rows[0]?.n).toBe(5 * 1024);
  });
});
