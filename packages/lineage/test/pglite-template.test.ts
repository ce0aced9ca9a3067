import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PipelineConfig } from "@factflow/protocols";
import { afterAll, describe, expect, it } from "vitest";
import { openLineageDatabase, uuidv7 } from "../src/index.js";
import { pgliteTemplateRoot, seedFromTemplate } from "../src/pglite-template.js";

// A new embedded database copied from a template made once (FACTFLOW_PGLITE_TEMPLATE_DIR), instead
// of PostgreSQL's initdb for every data directory.

const root = mkdtempSync(join(tmpdir(), "factflow-template-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A stand-in for initdb: writes the two files a template must have, counting its calls. */
function fakeInit(calls: { n: number }) {
  return async (dir: string) => {
    calls.n++;
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "PG_VERSION"), "17\n");
    writeFileSync(join(dir, "made-by"), String(calls.n));
  };
}

describe("seedFromTemplate", () => {
  it("makes the template once and copies it into each empty directory", async () => {
    const templates = join(root, "once");
    const calls = { n: 0 };
    const a = join(root, "a");
    const b = join(root, "b");
    mkdirSync(a);
    expect(await seedFromTemplate(a, templates, fakeInit(calls))).toBe(true);
    expect(await seedFromTemplate(b, templates, fakeInit(calls))).toBe(true);
    expect(calls.n).toBe(1);
    expect(readFileSync(join(b, "PG_VERSION"), "utf8")).toBe("17\n");
    // No half-made candidate is left next to the template.
    expect(readdirSync(templates).filter((name) => name.includes(".tmp-"))).toEqual([]);
  });

  it("leaves a directory that already holds files alone", async () => {
    const templates = join(root, "existing");
    const dir = join(root, "full");
    mkdirSync(dir);
    writeFileSync(join(dir, "PG_VERSION"), "16\n");
    const calls = { n: 0 };
    expect(await seedFromTemplate(dir, templates, fakeInit(calls))).toBe(false);
    expect(calls.n).toBe(0);
    expect(readFileSync(join(dir, "PG_VERSION"), "utf8")).toBe("16\n");
    expect(existsSync(templates)).toBe(false);
  });

  it("lets racing callers each build a candidate, keeps one template and copies it everywhere", async () => {
    const templates = join(root, "race");
    const calls = { n: 0 };
    const dirs = Array.from({ length: 4 }, (_, i) => join(root, `race-${i}`));
    const results = await Promise.all(dirs.map((dir) => seedFromTemplate(dir, templates, fakeInit(calls))));
    expect(results).toEqual([true, true, true, true]);
    const kept = readFileSync(
      join(readdirSync(templates).map((n) => join(templates, n))[0] ?? "", "made-by"),
      "utf8",
    );
    for (const dir of dirs) expect(readFileSync(join(dir, "made-by"), "utf8")).toBe(kept);
    expect(readdirSync(templates).filter((name) => name.includes(".tmp-"))).toEqual([]);
  });
});

describe("pgliteTemplateRoot", () => {
  it("uses the variable when set, none when it is empty, else the user's cache directory", async () => {
    expect(await pgliteTemplateRoot({ FACTFLOW_PGLITE_TEMPLATE_DIR: "/somewhere" })).toBe("/somewhere");
    expect(await pgliteTemplateRoot({ FACTFLOW_PGLITE_TEMPLATE_DIR: "" })).toBeUndefined();
    const cache = join(root, "xdg-cache");
    const chosen = await pgliteTemplateRoot({ XDG_CACHE_HOME: cache });
    expect(chosen).toBe(join(cache, "factflow", "pglite-templates"));
    expect(existsSync(chosen as string)).toBe(true);
  });

  it("gives none when the cache directory cannot be created", async () => {
    const file = join(root, "not-a-dir");
    writeFileSync(file, "");
    expect(await pgliteTemplateRoot({ XDG_CACHE_HOME: file })).toBeUndefined();
  });
});

describe("openLineageDatabase with FACTFLOW_PGLITE_TEMPLATE_DIR", () => {
  it("opens working databases copied from one template, each with its own rows", async () => {
    const templates = join(root, "pglite");
    const saved = process.env.FACTFLOW_PGLITE_TEMPLATE_DIR;
    process.env.FACTFLOW_PGLITE_TEMPLATE_DIR = templates;
    try {
      const first = await openLineageDatabase({ dataDir: join(root, "db-1") });
      const second = await openLineageDatabase({ dataDir: join(root, "db-2") });
      try {
        expect(readdirSync(templates).filter((name) => name.startsWith("pglite-"))).toHaveLength(1);
        const created = await first.executions.createExecution({
          id: uuidv7(),
          configName: "template-test",
          configVersion: null,
          configSnapshot: { name: "template-test", routes: {} } as unknown as PipelineConfig,
          input: null,
        });
        expect((await first.executions.getExecution(created.id))?.id).toBe(created.id);
        expect(await second.executions.getExecution(created.id)).toBeUndefined();
      } finally {
        await first.close();
        await second.close();
      }
    } finally {
      if (saved === undefined) delete process.env.FACTFLOW_PGLITE_TEMPLATE_DIR;
      else process.env.FACTFLOW_PGLITE_TEMPLATE_DIR = saved;
    }
  }, 180_000);
});

describe("a new database without a template", () => {
  it("is made in a child process, then opens on this thread (pgliteWorker: false)", async () => {
    const saved = process.env.FACTFLOW_PGLITE_TEMPLATE_DIR;
    process.env.FACTFLOW_PGLITE_TEMPLATE_DIR = "";
    try {
      const dataDir = join(root, "no-template");
      const db = await openLineageDatabase({ dataDir, pgliteWorker: false });
      try {
        const created = await db.executions.createExecution({
          id: uuidv7(),
          configName: "no-template",
          configVersion: null,
          configSnapshot: { name: "no-template", routes: {} } as unknown as PipelineConfig,
          input: null,
        });
        expect((await db.executions.getExecution(created.id))?.id).toBe(created.id);
        expect(existsSync(join(dataDir, "pglite", "PG_VERSION"))).toBe(true);
      } finally {
        await db.close();
      }
    } finally {
      if (saved === undefined) delete process.env.FACTFLOW_PGLITE_TEMPLATE_DIR;
      else process.env.FACTFLOW_PGLITE_TEMPLATE_DIR = saved;
    }
  }, 180_000);
});
