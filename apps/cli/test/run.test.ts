import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "../../..");
const BIN = join(ROOT, "apps/cli/src/bin.ts");
const PIPELINE = join(ROOT, "examples/docs-ingest/pipeline.yaml");
const SAMPLE_DOCS = join(ROOT, "examples/docs-ingest/sample-docs");
const dataDir = mkdtempSync(join(tmpdir(), "factflow-cli-"));

/** Runs `factflow ...` as `pnpm factflow` does: node with the source condition and tsx. */
function factflow(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ["--conditions=factflow-source", "--import", "tsx", BIN, ...args],
      {
        cwd: ROOT,
        env: { ...process.env, FACTFLOW_DATA_DIR: dataDir, FACTFLOW_SERVER_URL: "", ...env },
        timeout: 120_000,
      },
      (error, stdout, stderr) =>
        done({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr }),
    );
  });
}

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("factflow run", () => {
  let summary: {
    id: string;
    status: string;
    routes: {
      route: string;
      messages: number;
      completed: number;
      dead_letters: number;
      adapter_failures: number;
    }[];
    failures: number;
    dead_letters: number;
    lineage_rows: number;
    artefacts: { count: number; location: string; keys: string[] };
  };

  it("runs the example on the embedded default and prints a JSON summary", async () => {
    const input = JSON.stringify({ roots: [SAMPLE_DOCS] });
    const result = await factflow(["run", PIPELINE, "--input", input, "--json"]);
    expect(result.stderr).not.toMatch(/error/i);
    expect(result.code).toBe(0);
    summary = JSON.parse(result.stdout);
    expect(summary.status).toBe("completed");
    const byRoute = Object.fromEntries(summary.routes.map((r) => [r.route, r]));
    // 3 files, 13 sections, 1 always fails (dead letter); the 12 others are batched (by 8, or fewer
    // on a timed flush) and every one is written.
    expect(byRoute.discover?.messages).toBe(1);
    expect(byRoute.split?.messages).toBe(3);
    expect(byRoute.enrich?.messages).toBe(13);
    expect(byRoute.enrich?.dead_letters).toBe(1);
    expect(byRoute.batch?.completed).toBe(12);
    expect(byRoute.write?.completed).toBeGreaterThanOrEqual(2);
    expect(summary.dead_letters).toBe(1);
    // 2 sections fail once, 1 fails all 3 attempts.
    expect(summary.failures).toBe(5);
    expect(summary.artefacts.count).toBe(byRoute.write?.completed);
    expect(summary.artefacts.location).toContain(dataDir);
    let sections = 0;
    for (const key of summary.artefacts.keys) {
      const artefact = JSON.parse(readFileSync(join(dataDir, "artefacts", key), "utf8")) as {
        sections: unknown[];
      };
      sections += artefact.sections.length;
    }
    expect(sections).toBe(12);
  }, 120_000);

  it("records lineage that the lineage command reads back", async () => {
    const result = await factflow(["lineage", summary.id, "--json", "--limit", "1"]);
    expect(result.code).toBe(0);
    const page = JSON.parse(result.stdout) as { total: number };
    expect(page.total).toBe(summary.lineage_rows);
    const failed = JSON.parse(
      (await factflow(["lineage", summary.id, "--json", "--status", "failed", "--kind", "adapter"])).stdout,
    ) as {
      total: number;
    };
    expect(failed.total).toBe(summary.failures);
  }, 120_000);

  it("prints a message's lineage tree, and says when --limit cut it", async () => {
    const discover = JSON.parse(
      (await factflow(["lineage", summary.id, "--json", "--route", "discover", "--kind", "message"])).stdout,
    ) as { items: { message_id: string }[] };
    const root = discover.items[0]?.message_id ?? "";
    const whole = JSON.parse(
      (await factflow(["lineage", summary.id, "--message", root, "--json"])).stdout,
    ) as {
      items: unknown[];
      truncated: boolean;
    };
    expect(whole.truncated).toBe(false);
    expect(whole.items.length).toBe(summary.lineage_rows);
    const cut = await factflow(["lineage", summary.id, "--message", root, "--limit", "3"]);
    expect(cut.code).toBe(0);
    expect(cut.stdout).toContain("the first 3 rows of this tree (--limit N, up to 20000, shows more)");
  }, 120_000);

  it("prints plain progress lines and a readable summary when not on a terminal", async () => {
    const result = await factflow(["run", PIPELINE, "--input", JSON.stringify({ roots: [SAMPLE_DOCS] })]);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^progress enrich: done=\d+/m);
    expect(result.stdout).toMatch(/execution \S+ completed in/);
    expect(result.stdout).toMatch(
      /dead letters: 1 \(factflow dlq list --execution \S+ --queue docs\.sections\)/,
    );
    expect(result.stdout).toMatch(/artefacts: +\d+ written under docs-ingest\/\S+\/ \(/);
  }, 120_000);

  it("exits non-zero when the execution fails, and 2 on an invalid pipeline", async () => {
    const dir = mkdtempSync(join(tmpdir(), "factflow-cli-cfg-"));
    const fatal = join(dir, "fatal.yaml");
    writeFileSync(
      fatal,
      "name: fatal\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters:\n      - type: fail\n        config: { mode: fatal }\n",
    );
    const failed = await factflow(["run", fatal]);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toMatch(/execution \S+ failed/);
    const invalid = join(dir, "invalid.yaml");
    writeFileSync(
      invalid,
      "name: invalid\ninit: { route: a }\nroutes:\n  a:\n    inbound: { queue: a.in }\n    adapters:\n      - type: no_such_adapter\n",
    );
    const bad = await factflow(["run", invalid]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("no_such_adapter");
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);
});
