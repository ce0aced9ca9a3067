import { mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import { afterAll, describe, expect, it } from "vitest";
import { connectPglite } from "../src/pglite.js";
import { pgliteSettings } from "../src/pglite-settings.js";

const root = mkdtempSync(join(tmpdir(), "factflow-pglite-settings-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A data directory whose log holds one (sparse) segment file of `bytes`. */
function dirWithSegment(name: string, bytes: number): string {
  const dir = join(root, name);
  mkdirSync(join(dir, "pg_wal"), { recursive: true });
  const segment = join(dir, "pg_wal", "000000010000000000000001");
  writeFileSync(segment, "");
  truncateSync(segment, bytes);
  return dir;
}

function setting(params: string[], name: string): string | undefined {
  return params.find((p) => p.startsWith(`${name}=`))?.slice(name.length + 1);
}

describe("PGlite's write-ahead log settings", () => {
  it("keep 2–8 MB of log for 1 MB segments and 32–64 MB for a database made with 16 MB ones", async () => {
    for (const [dir, min, max] of [
      [join(root, "new"), "2MB", "8MB"],
      [dirWithSegment("small", 1024 * 1024), "2MB", "8MB"],
      [dirWithSegment("old", 16 * 1024 * 1024), "32MB", "64MB"],
    ] as const) {
      const params = await pgliteSettings(dir);
      expect(setting(params, "min_wal_size"), dir).toBe(min);
      expect(setting(params, "max_wal_size"), dir).toBe(max);
    }
  });

  it("gives a new database 1 MB log segments", async () => {
    const handles = await connectPglite(join(root, "data"));
    try {
      const shown = await sql<{ size: string }>`select current_setting('wal_segment_size') as size`.execute(
        handles.db,
      );
      expect(shown.rows[0]?.size).toBe("1MB");
      const min = await sql<{ size: string }>`select current_setting('min_wal_size') as size`.execute(
        handles.db,
      );
      expect(min.rows[0]?.size).toBe("2MB");
    } finally {
      await handles.close();
    }
  });
});
