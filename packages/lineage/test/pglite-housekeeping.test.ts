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

/** About 1 MB of rows for a scratch `lineage (id integer, body text)`, as a binary COPY stream. */
function megabyteOfRows(from: number): Uint8Array {
  const filler = Buffer.from("x".repeat(1000));
  const header = Buffer.from([
    0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  ]);
  const rows: Buffer[] = [header];
  for (let i = 0; i < 1024; i++) {
    const row = Buffer.alloc(2 + 8 + 4);
    row.writeInt16BE(2, 0);
    row.writeInt32BE(4, 2);
    row.writeInt32BE(from + i, 6);
    row.writeInt32BE(filler.length, 10);
    rows.push(row, filler);
  }
  rows.push(Buffer.from([0xff, 0xff]));
  return Buffer.concat(rows);
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
  it("checkpoints after some megabytes even when they came in a handful of commits", async () => {
    const copy = handles.writer.copy;
    expect(copy).toBeDefined();
    const start = await lastCheckpoint();
    // Commits of about 1 MB each, far fewer than the commit threshold: only the volume counts. A
    // vacuum round runs every 4 MB sent, a checkpoint every fourth round (about 16 MB).
    let firstCheckpointAt = 0;
    let written = 0;
    for (let i = 0; i < 24 && firstCheckpointAt === 0; i++) {
      await handles.writer.copy?.("lineage (id, body)", megabyteOfRows(i * 1024));
      written++;
      if ((await lastCheckpoint()) !== start) firstCheckpointAt = written;
    }
    expect(firstCheckpointAt).toBeGreaterThan(12);
    expect(firstCheckpointAt).toBeLessThanOrEqual(20);
    const rows = await sql<{ n: number }>`select count(*)::int as n from lineage`.execute(handles.db);
    expect(rows.rows[0]?.n).toBe(written * 1024);
  });
});
