import { type CliContext, openBackend, UsageError } from "../context.js";
import { json, table } from "../output.js";
import { showExecution, watchExecution } from "./executions.js";

type Row = {
  id: string;
  kind: string;
  route: string;
  adapter: string | null;
  message_id: string;
  parent_id: string | null;
  attempt: number;
  status: string;
  error: { class: string; message: string } | null;
  output_keys: string[];
};

function render(rows: readonly Row[]): string {
  return table(
    ["kind", "route", "adapter", "message", "attempt", "status", "error / outputs"],
    rows.map((r) => [
      r.kind,
      r.route,
      r.adapter,
      r.message_id.slice(0, 8),
      r.attempt,
      r.status,
      r.error === null ? r.output_keys.join(",") : `${r.error.class}: ${r.error.message}`.slice(0, 80),
    ]),
  );
}

/** `factflow lineage EXECUTION [--message ID] [--route R] [--status S] [--kind K]`. */
export async function lineageCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const id = args[0];
  if (id === undefined)
    throw new UsageError("usage: factflow lineage EXECUTION [--message ID] [--route R] [--status S]");
  const backend = await openBackend(ctx);
  try {
    const message = ctx.flags.message?.[0];
    if (message !== undefined) {
      const tree = await backend.client.get<{ items: Row[] }>(
        `/api/v1/executions/${id}/lineage/${encodeURIComponent(message)}`,
      );
      ctx.output.out(ctx.flags.json ? json(tree) : render(tree.items));
      return 0;
    }
    const params = new URLSearchParams();
    for (const key of ["route", "status", "kind", "limit", "offset"] as const) {
      const value = ctx.flags[key];
      if (value !== undefined) params.set(key, value);
    }
    const page = await backend.client.get<{ total: number; offset: number; items: Row[] }>(
      `/api/v1/executions/${id}/lineage?${params.toString()}`,
    );
    if (ctx.flags.json) ctx.output.out(json(page));
    else
      ctx.output.out(
        `${render(page.items)}\nrows ${page.offset + 1}-${page.offset + page.items.length} of ${page.total}`,
      );
    return 0;
  } finally {
    await backend.close();
  }
}

/** `factflow replay EXECUTION --from ROUTE [--message ID]... [--wait]`. */
export async function replayCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const id = args[0];
  const from = ctx.flags.from;
  if (id === undefined || from === undefined)
    throw new UsageError("usage: factflow replay EXECUTION --from ROUTE [--message ID]... [--wait]");
  const backend = await openBackend(ctx);
  try {
    const messages = ctx.flags.message;
    const created = await backend.client.post<{ id: string; status: string }>(
      `/api/v1/executions/${id}/replay`,
      {
        from_route: from,
        ...(messages === undefined || messages.length === 0 ? {} : { message_ids: messages }),
      },
    );
    if (!ctx.flags.wait && backend.runtime === undefined) {
      ctx.output.out(
        ctx.flags.json ? json(created) : `started replay ${created.id} of ${id} from route ${from}`,
      );
      return 0;
    }
    if (!ctx.flags.json) ctx.output.out(`started replay ${created.id} of ${id} from route ${from}`);
    const status = await watchExecution(ctx, backend.client, created.id);
    showExecution(ctx, await backend.client.get(`/api/v1/executions/${created.id}?snapshot=true`));
    return status === "completed" ? 0 : 1;
  } finally {
    await backend.close();
  }
}
