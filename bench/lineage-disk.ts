/**
 * `pnpm bench lineage-disk [N] [postgres|pglite]`: disk used by lineage per message hop.
 *
 * Runs the `pnpm bench peer` relay (seed → hop1 → hop2 → hop3, embedded memory provider) once with
 * N messages (default 5000) on a fresh lineage database and reports the growth of the database:
 *
 * - PGlite: the size of its directory (files on disk, WAL included) after the run and after close;
 * - PostgreSQL: `pg_total_relation_size('lineage')` (table, TOAST and indexes; the server's WAL is
 *   shared with other databases and left out) after a VACUUM, in a scratch database dropped at the end.
 *
 * `bytesPerHop` divides the growth by the hops (3 × N deliveries; each leaves a message row and an
 * adapter row). Aim: ≤ 1024.
 */
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { openLineageDatabase } from "@factflow/lineage";
import { Client } from "pg";
import { createScratchDatabase } from "./_scratch-database.js";
import { engineRound } from "./peer.js";

async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += await directoryBytes(path);
    else if (entry.isFile()) total += (await stat(path)).size;
  }
  return total;
}

async function pglite(n: number): Promise<Record<string, number | string>> {
  const dir = await mkdtemp(join(tmpdir(), "factflow-bench-disk-"));
  try {
    const db = await openLineageDatabase({ dataDir: dir });
    // An empty execution first, so the baseline includes what any database holds.
    await engineRound(10, db);
    const wal = () => directoryBytes(join(dir, "pglite", "pg_wal"));
    const before = await directoryBytes(dir);
    const walBefore = await wal();
    await engineRound(n, db);
    const after = await directoryBytes(dir);
    const walAfter = await wal();
    await db.close();
    const closed = await directoryBytes(dir);
    return {
      lineage: "pglite",
      bytesBefore: before,
      bytesAfter: after,
      bytesAfterClose: closed,
      bytesPerHop: Math.round((after - before) / (n * 3)),
      // The write-ahead log's share (segments are recycled, so it stops growing past a point).
      walBytesPerHop: Math.round((walAfter - walBefore) / (n * 3)),
      tableBytesPerHop: Math.round((after - before - (walAfter - walBefore)) / (n * 3)),
      bytesPerHopAfterClose: Math.round((closed - before) / (n * 3)),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function postgresDisk(n: number): Promise<Record<string, number | string>> {
  const scratch = await createScratchDatabase();
  const sql = new Client({ connectionString: scratch.url });
  sql.on("error", () => {});
  try {
    await sql.connect();
    const db = await openLineageDatabase({ databaseUrl: scratch.url });
    const size = async () => {
      await sql.query("vacuum lineage");
      const { rows } = await sql.query<{ bytes: string }>(
        "select pg_total_relation_size('lineage') as bytes",
      );
      return Number(rows[0]?.bytes ?? 0);
    };
    await engineRound(10, db);
    const before = await size();
    await engineRound(n, db);
    await db.lineage.flush();
    const after = await size();
    await db.close();
    return {
      lineage: "postgres",
      bytesBefore: before,
      bytesAfter: after,
      bytesPerHop: Math.round((after - before) / (n * 3)),
    };
  } finally {
    await sql.end().catch(() => {});
    await scratch.drop();
  }
}

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 5000);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] lineage-disk: N must be a positive integer, got "${args[0]}"`);
  const only = args[1];
  if (only !== undefined && only !== "postgres" && only !== "pglite")
    throw new Error(`[factflow/bench] lineage-disk: unknown dialect "${only}": use postgres or pglite`);
  for (const dialect of only === undefined ? ["postgres", "pglite"] : [only]) {
    const result = dialect === "pglite" ? await pglite(n) : await postgresDisk(n);
    console.log(
      JSON.stringify({
        bench: "lineage-disk",
        n,
        hops: n * 3,
        ...result,
        aimBytesPerHop: 1024,
        loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
      }),
    );
  }
}
