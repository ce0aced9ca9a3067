import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";

/**
 * `initdb` arguments of a new embedded database: write-ahead log segments of 1 MB instead of
 * PostgreSQL's 16 MB. PostgreSQL keeps at least two segments, and the log of a lineage database
 * only needs to reach from one checkpoint to the next (the writer checkpoints every few MB), so
 * with 16 MB segments a fresh database carries 16–32 MB of log it never needs.
 */
export const PGLITE_INITDB_ARGS: readonly string[] = ["--wal-segsize=1"];

/** Names the layout {@link PGLITE_INITDB_ARGS} makes, in template names: a change of them needs a new template. */
export const PGLITE_LAYOUT = "wal1mb";

/** A segment's file name: timeline, log and segment number, 24 hex digits. */
const SEGMENT_NAME = /^[0-9A-F]{24}$/;

/**
 * The PostgreSQL settings PGlite starts with in `dir`, after its own defaults.
 *
 * - `shared_buffers` (128 MB by default) is most of PGlite's resident memory; its files sit in the
 *   OS page cache anyway.
 * - The log is capped: lineage is written in small commits all day, and the default 1 GB would sit
 *   on disk next to a small database. PGlite's single-user PostgreSQL checkpoints by itself once
 *   `max_wal_size` is near (besides the writer's own rounds), and keeps at most that much log for
 *   reuse. Both bounds must be at least two segments: a database made with 16 MB segments keeps
 *   32 MB / 64 MB.
 */
export async function pgliteSettings(dir: string): Promise<string[]> {
  const segment = await walSegmentBytes(dir);
  const small = segment === undefined || segment <= 1024 * 1024;
  return [
    "-c",
    "shared_buffers=16MB",
    "-c",
    `max_wal_size=${small ? "8MB" : "64MB"}`,
    "-c",
    `min_wal_size=${small ? "2MB" : "32MB"}`,
  ];
}

/** The size of the log segments in `dir`, or undefined for a directory without a database yet. */
async function walSegmentBytes(dir: string): Promise<number | undefined> {
  const wal = join(dir, "pg_wal");
  const names = await readdir(wal).catch(() => [] as string[]);
  const segment = names.find((name) => SEGMENT_NAME.test(name));
  if (segment === undefined) return undefined;
  return (await stat(join(wal, segment))).size;
}
