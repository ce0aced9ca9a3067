/**
 * Heap per waiting message of the embedded file mode, with a given `memoryBudgetBytes`:
 *
 *     node --expose-gc --conditions=factflow-source --import tsx bench/_memory-broker.ts [N] [budget]
 *
 * Publishes N (default 100 000) messages shaped like the engine's (a small body, correlation and
 * execution ids, a lineage parent header) to one queue nobody consumes, and prints the heap they
 * hold per message after a full GC, the bytes the broker counts per message, and what it kept in
 * memory and paged out.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmbeddedProvider } from "@factflow/infra-embedded";

const n = Number(process.argv[2] ?? 100_000);
const budget = Number(process.argv[3] ?? 67_108_864);
const dir = await mkdtemp(join(tmpdir(), "factflow-mem-broker-"));
const p = createEmbeddedProvider({ mode: "file", dataDir: dir, memoryBudgetBytes: budget });
await p.connect();
const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const before = process.memoryUsage().heapUsed;
const exec = crypto.randomUUID();
for (let from = 0; from < n; from += 1000) {
  await Promise.all(
    Array.from({ length: Math.min(1000, n - from) }, (_, k) =>
      p.publish("/queue/hop1.in", {
        body: { index: from + k },
        correlationId: crypto.randomUUID(),
        executionId: exec,
        headers: { "x-lineage-parent": crypto.randomUUID(), "x-factflow-route": "hop1" },
      }),
    ),
  );
}
gc?.();
const after = process.memoryUsage().heapUsed;
const s = p.storeStats();
console.log(
  JSON.stringify({
    n,
    budget,
    heapPerMsg: Math.round((after - before) / n),
    bytesPerMsg: Math.round(s.liveBytes / n),
    resident: s.residentBytes,
    paged: s.pagedOutMessages,
    rssMb: Math.round(process.memoryUsage.rss() / 2 ** 20),
  }),
);
await p.close();
await rm(dir, { recursive: true, force: true });
