import type { CliContext } from "../context.js";
import { openBackend, UsageError } from "../context.js";
import { json } from "../output.js";

/**
 * `factflow executions prune --older-than-days N`: deletes executions that finished more than N days
 * ago, with their lineage (running executions are kept). The same job a server runs hourly when
 * FACTFLOW_RETENTION_DAYS is set; here it runs once, through `POST /api/v1/system/retention`.
 */
export async function pruneExecutions(ctx: CliContext): Promise<number> {
  const raw = ctx.flags["older-than-days"];
  const usage =
    "usage: factflow executions prune --older-than-days N (N >= 0; 0 deletes every finished execution)";
  if (raw === undefined) throw new UsageError(`factflow executions prune needs --older-than-days\n${usage}`);
  const days = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(days) || days < 0)
    throw new UsageError(`--older-than-days must be a number >= 0 (got "${raw}")\n${usage}`);
  const backend = await openBackend(ctx);
  try {
    const { client } = backend;
    const result = await client.call(
      client.api.api.v1.system.retention.$post({ json: { older_than_days: days } }),
    );
    ctx.output.out(
      ctx.flags.json
        ? json(result)
        : `deleted ${result.deleted} finished execution${result.deleted === 1 ? "" : "s"} (finished before ${result.before}) with their lineage`,
    );
    return 0;
  } finally {
    await backend.close();
  }
}
