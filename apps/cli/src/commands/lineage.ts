import type { lineageJson } from "@factflow/server";
import { type CliContext, openBackend, UsageError } from "../context.js";
import { json, table } from "../output.js";
import { defined, getExecution, showExecution, watchExecution } from "./executions.js";

/** The query of `GET /api/v1/executions/{id}/lineage`. */
type LineageQuery = {
  status?: "pending" | "initiated" | "processing" | "completed" | "failed" | "abandoned";
  kind?: "message" | "adapter";
};

/** The fields of a lineage row (the server's `lineageJson`) that the table shows. */
type Row = Pick<
  ReturnType<typeof lineageJson>,
  "kind" | "route" | "adapter" | "message_id" | "attempt" | "status" | "output_keys"
> & { readonly error: { readonly class: string; readonly message: string } | null };

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
  const { client } = backend;
  try {
    const message = ctx.flags.message?.[0];
    if (message !== undefined) {
      const tree = await client.call(
        client.api.api.v1.executions[":id"].lineage[":messageId"].$get({
          param: { id, messageId: message },
          query: defined({ limit: ctx.flags.limit }),
        }),
      );
      if (ctx.flags.json) ctx.output.out(json(tree));
      else
        ctx.output.out(
          tree.truncated
            ? `${render(tree.items)}\nthe first ${tree.items.length} rows of this tree (--limit N, up to 20000, shows more)`
            : render(tree.items),
        );
      return 0;
    }
    const page = await client.call(
      client.api.api.v1.executions[":id"].lineage.$get({
        param: { id },
        // The server checks status and kind and answers 400 naming the allowed values.
        query: defined({
          route: ctx.flags.route,
          status: ctx.flags.status as LineageQuery["status"],
          kind: ctx.flags.kind as LineageQuery["kind"],
          limit: ctx.flags.limit,
          offset: ctx.flags.offset,
        }),
      }),
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
    const { client } = backend;
    const created = await client.call(
      client.api.api.v1.executions[":id"].replay.$post({
        param: { id },
        json: {
          from_route: from,
          ...(messages === undefined || messages.length === 0 ? {} : { message_ids: messages }),
        },
      }),
    );
    if (!ctx.flags.wait && backend.runtime === undefined) {
      ctx.output.out(
        ctx.flags.json ? json(created) : `started replay ${created.id} of ${id} from route ${from}`,
      );
      return 0;
    }
    if (!ctx.flags.json) ctx.output.out(`started replay ${created.id} of ${id} from route ${from}`);
    const status = await watchExecution(ctx, backend.client, created.id);
    showExecution(ctx, await getExecution(client, created.id, { snapshot: true }));
    return status === "completed" ? 0 : 1;
  } finally {
    await backend.close();
  }
}
