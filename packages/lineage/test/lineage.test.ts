import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openLineageDatabase, uuidv7 } from "../src/index.js";
import { lineageSuite, row } from "./lineage-suite.js";

let dir = "";
lineageSuite("pglite", {
  async open() {
    dir = await mkdtemp(join(tmpdir(), "factflow-lineage-"));
    return openLineageDatabase({ dataDir: dir });
  },
  async cleanup() {
    await rm(dir, { recursive: true, force: true });
  },
});

describe("opening PGlite", () => {
  it("refuses a second open of the same directory in one process, and reopens after close", async () => {
    const base = await mkdtemp(join(tmpdir(), "factflow-lineage-twice-"));
    try {
      const first = await openLineageDatabase({ dataDir: base });
      await expect(openLineageDatabase({ dataDir: base })).rejects.toThrow(/already open in this process/);
      const exec = uuidv7();
      first.lineage.record(row(exec));
      await first.close();
      const again = await openLineageDatabase({ dataDir: base });
      expect(await again.lineage.countOpen(exec)).toBe(1);
      // Closing both stores separately releases the database too.
      await again.lineage.close();
      await again.executions.close();
      const third = await openLineageDatabase({ dataDir: base });
      await third.close();
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it("fails clearly when the data directory cannot hold a database", async () => {
    const base = await mkdtemp(join(tmpdir(), "factflow-lineage-bad-"));
    try {
      await writeFile(join(base, "pglite"), "not a directory");
      await expect(openLineageDatabase({ dataDir: base })).rejects.toMatchObject({
        code: "lineage_error",
        message: expect.stringContaining("cannot open the embedded PGlite database"),
      });
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});
