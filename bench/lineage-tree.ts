/**
 * `pnpm bench lineage-tree [rows] [limit] [pglite|postgres]` (default 100 002 rows, the store's
 * default limit, PGlite): how long `tree()` takes for the root message of one execution of `rows`
 * lineage rows (a root message fanning out to 1000 child messages, each fanning out to grandchild
 * messages; one message row and one adapter row per message), and for a leaf message. The rows go
 * in through the store's writer: on PGlite in a temporary directory, or on PostgreSQL in a scratch
 * database of `DATABASE_URL` (default postgres://postgres@127.0.0.1:5432), dropped at the end.
 * Prints one JSON line per query.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { openLineageDatabase, uuidv7 } from "@factflow/lineage";
import type { LineageRow } from "@factflow/protocols";
import { createScratchDatabase, type ScratchDatabase } from "./_scratch-database.js";

const CHILDREN = 1000;

/** A message row and its adapter row (child of the message row), under `parentId`. */
function message(
  executionId: string,
  messageId: string,
  route: string,
  parentId: string | undefined,
  at: number,
) {
  const messageRow: LineageRow = {
    id: uuidv7(),
    executionId,
    kind: "message",
    route,
    messageId,
    correlationId: "m-root",
    ...(parentId === undefined ? {} : { parentId }),
    attempt: 1,
    status: "completed",
    payload: { n: at },
    startedAt: new Date(Date.UTC(2024, 0, 1) + at * 10).toISOString(),
    finishedAt: new Date(Date.UTC(2024, 0, 1) + at * 10 + 5).toISOString(),
  };
  const { payload: _, ...rest } = messageRow;
  const adapterRow: LineageRow = {
    ...rest,
    id: uuidv7(),
    kind: "adapter",
    adapter: "split",
    adapterIndex: 0,
    parentId: messageRow.id,
    startedAt: new Date(Date.UTC(2024, 0, 1) + at * 10 + 1).toISOString(),
  };
  return [messageRow, adapterRow] as const;
}

export async function run(args: string[]): Promise<void> {
  const store = args.includes("postgres") ? "postgres" : "pglite";
  const numbers = args.filter((a) => /^\d+$/.test(a));
  const rows = Number.parseInt(numbers[0] ?? "100002", 10);
  const limit = numbers[1] === undefined ? undefined : Number.parseInt(numbers[1], 10);
  const grandchildren = Math.max(0, Math.floor((rows - 2 - CHILDREN * 2) / 2 / CHILDREN));
  let dir: string | undefined;
  let scratch: ScratchDatabase | undefined;
  if (store === "postgres") scratch = await createScratchDatabase();
  else dir = await mkdtemp(join(tmpdir(), "factflow-bench-tree-"));
  const db = await openLineageDatabase(
    scratch === undefined ? { dataDir: dir } : { databaseUrl: scratch.url },
  );
  try {
    const executionId = uuidv7();
    let at = 0;
    let written = 0;
    let leaf = "m-root";
    const root = message(executionId, "m-root", "ingest", undefined, at++);
    for (const r of root) db.lineage.record(r);
    written += 2;
    for (let c = 0; c < CHILDREN; c++) {
      const child = message(executionId, `m-${c}`, "chunk", root[1].id, at++);
      for (const r of child) db.lineage.record(r);
      written += 2;
      for (let g = 0; g < grandchildren; g++) {
        leaf = `m-${c}-${g}`;
        for (const r of message(executionId, leaf, "embed", child[1].id, at++)) db.lineage.record(r);
        written += 2;
      }
      await db.lineage.roomFor?.(10_000);
    }
    await db.lineage.flush();
    console.error(`[factflow/bench] lineage-tree: wrote ${written} rows to ${store}`);
    for (const [name, messageId] of [
      ["root", "m-root"],
      ["leaf", leaf],
    ] as const) {
      const started = performance.now();
      const tree = await db.lineage.tree(executionId, messageId, limit === undefined ? undefined : { limit });
      const ms = performance.now() - started;
      console.log(
        JSON.stringify({
          store,
          rows: written,
          message: name,
          ms: Math.round(ms),
          items: tree.items.length,
          truncated: tree.truncated,
        }),
      );
    }
  } finally {
    await db.close();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    await scratch?.drop();
  }
}
