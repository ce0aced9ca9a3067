import { readFileSync } from "node:fs";
import { createEmbeddedProvider } from "@factflow/infra-embedded";
import { openModelRun } from "./harness/runner.ts";
import { expectedOutcome } from "./harness/oracle.ts";
import { differences } from "./harness/check.ts";
const file = process.argv[2] as string;
const shape = JSON.parse(readFileSync(file, "utf8")).shape;
const m = await openModelRun(createEmbeddedProvider({ mode: "memory" }));
for (let i = 0; i < Number(process.argv[3] ?? 5); i++) {
  const t = Date.now();
  const o = await m.run(shape);
  const d = differences(shape, expectedOutcome(shape), o);
  console.log(i, Date.now() - t, "ms", d.length === 0 ? "ok" : d.join(" | ").slice(0, 300));
  if (d.length && process.env.ROWS) { const rows = await m.db.lineage.rows(o.id, { limit: 10000 }); for (const r of rows.items.filter(r => r.route === "r1")) console.log(JSON.stringify({kind: r.kind, a: r.adapter, s: r.status, at: r.attempt, k: (r.payload as any)?.k, st: r.startedAt.slice(17), f: r.finishedAt?.slice(17), e: r.error?.message})); }
}
await m.close();
