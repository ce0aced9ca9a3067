/**
 * The engine side of `pnpm bench peer N 1 file:pglite` alone (no BullMQ round), for the memory of the
 * default setup under a backlog:
 *
 *     node --conditions=factflow-source --import tsx bench/_memory-peer.ts [N] [concurrency]
 *
 * One warm-up round of 1000, then one round of N (default 20 000) on the embedded file queue and
 * PGlite lineage, each route running `concurrency` deliveries at once (default 16, a moderate
 * setting; the peer bench's file modes run 256). Prints the round's figures (`peakRssMb` and
 * `lineageLost` among them), the main thread's peak `heapUsed`, and `process.memoryUsage()` when RSS
 * peaked (`atPeakRss`; PGlite's worker thread is in `rss` only).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLineageDatabase } from "@factflow/lineage";
import { engineRound } from "./peer.js";

const n = Number(process.argv[2] ?? 20_000);
const concurrency = Number(process.argv[3] ?? 16);
const dir = await mkdtemp(join(tmpdir(), "factflow-mem-peer-"));
const db = await openLineageDatabase({ dataDir: dir });
let peakHeap = 0;
let atPeak: NodeJS.MemoryUsage | undefined;
const t = setInterval(() => {
  const u = process.memoryUsage();
  peakHeap = Math.max(peakHeap, u.heapUsed);
  if (atPeak === undefined || u.rss > atPeak.rss) atPeak = u;
}, 100).unref();
const mb = (x: number) => Math.round(x / 2 ** 20);
try {
  await engineRound(1000, db, { queue: "file", adapter: "passthrough", concurrency });
  atPeak = undefined;
  const r = await engineRound(n, db, { queue: "file", adapter: "passthrough", concurrency });
  const p = atPeak as unknown as NodeJS.MemoryUsage;
  console.log(
    JSON.stringify({
      n,
      concurrency,
      msgsPerSec: Math.round(r.msgsPerSec),
      peakHeapMb: mb(peakHeap),
      atPeakRss: {
        rss: mb(p.rss),
        heapTotal: mb(p.heapTotal),
        heapUsed: mb(p.heapUsed),
        external: mb(p.external),
        arrayBuffers: mb(p.arrayBuffers),
      },
      ...r.extra,
    }),
  );
} finally {
  clearInterval(t);
  await db.close();
  await rm(dir, { recursive: true, force: true });
}
