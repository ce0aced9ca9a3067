/**
 * The engine side of `pnpm bench peer` alone, for profiling the engine's own cost:
 *
 *     node --cpu-prof --cpu-prof-dir=prof --conditions=factflow-source --import tsx bench/_profile-peer.ts [N] [memory|pglite|postgres|counting] [rounds] [memory|file]
 *
 * One warm-up round of 1000, then `rounds` rounds (default 1) of N (default 20 000); prints CPU µs
 * per hop of each round and the lowest, which is the steadiest figure on a busy machine.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { openLineageDatabase } from "@factflow/lineage";
import { createScratchDatabase } from "./_scratch-database.js";
import { CountingLineage } from "./hop-cpu.js";
import { engineRound } from "./peer.js";

const n = Number(process.argv[2] ?? 20_000);
const mode = process.argv[3] ?? "memory";
const rounds = Math.max(1, Number(process.argv[4] ?? 1));
/** The embedded queue's mode: `file` is the default setup's (with `pglite`). */
const queue = process.argv[5] === "file" ? "file" : "memory";
const dir = await mkdtemp(join(tmpdir(), "factflow-profile-peer-"));
// PostgreSQL lineage goes to a scratch database, dropped at the end.
const scratch = mode === "postgres" ? await createScratchDatabase() : undefined;
const opened = await openLineageDatabase(
  mode === "memory" || mode === "counting"
    ? { memory: true }
    : scratch !== undefined
      ? { databaseUrl: scratch.url }
      : { dataDir: dir },
);
// `counting`: lineage left out (see bench/hop-cpu.ts), the engine's own cost.
const db = mode === "counting" ? { lineage: new CountingLineage(), executions: opened.executions } : opened;
try {
  await engineRound(1000, db, { queue, adapter: "passthrough" });
  const perHop: number[] = [];
  let msgsPerSec = 0;
  let cpuMs = 0;
  for (let i = 0; i < rounds; i++) {
    const round = await engineRound(n, db, { queue, adapter: "passthrough" });
    perHop.push(Math.round((round.cpuMs * 1000) / (n * 3)));
    msgsPerSec = Math.max(msgsPerSec, Math.round(round.msgsPerSec));
    cpuMs += round.cpuMs;
  }
  console.log(
    JSON.stringify({
      lineage: mode,
      queue,
      n,
      msgsPerSec,
      cpuMs,
      cpuUsPerHop: Math.min(...perHop),
      rounds: perHop,
      loadAverage: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    }),
  );
} finally {
  await opened.close();
  await scratch?.drop();
  await rm(dir, { recursive: true, force: true });
}
