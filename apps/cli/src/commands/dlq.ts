import { parseScopedDestination, scopedDestination } from "@factflow/engine";
import { type CliContext, openBackend, UsageError } from "../context.js";
import { json, table } from "../output.js";
import { defined } from "./executions.js";

/** The destination named by `--queue` (a full `/queue/...` or a name, scoped by `--execution`). */
export function destinationOf(ctx: CliContext): string | undefined {
  const queue = ctx.flags.queue;
  if (queue === undefined) return undefined;
  if (queue.startsWith("/")) return queue;
  return ctx.flags.execution === undefined
    ? `/queue/${queue}`
    : scopedDestination(ctx.flags.execution, queue);
}

/**
 * `factflow dlq list [--queue Q [--execution ID]] | show --queue Q ID | redrive --queue Q [ID] [--force] | discard --queue Q ID`.
 * The server refuses to redrive into the queue of an execution that is over (nothing consumes it);
 * `factflow replay` re-runs its failures instead, and `--force` redrives anyway.
 */
export async function dlqCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const [sub, messageId] = args;
  const usage =
    "usage: factflow dlq list [--queue Q] | show --queue Q ID | redrive --queue Q [ID] [--force] | discard --queue Q ID (Q: /queue/... or a name with --execution ID)";
  if (sub === undefined || !["list", "show", "redrive", "discard"].includes(sub)) throw new UsageError(usage);
  const destination = destinationOf(ctx);
  if (sub !== "list" && destination === undefined)
    throw new UsageError(`factflow dlq ${sub} needs --queue\n${usage}`);
  if ((sub === "show" || sub === "discard") && messageId === undefined)
    throw new UsageError(`factflow dlq ${sub} needs a message id\n${usage}`);
  const backend = await openBackend(ctx);
  const { client } = backend;
  const source = {
    // Set for every subcommand that sends it (checked above).
    destination: destination as string,
    ...(ctx.flags.subscription === undefined ? {} : { subscription: ctx.flags.subscription }),
  };
  const redrive = { ...source, ...(ctx.flags.force ? { force: true } : {}) };
  try {
    if (sub === "list" && destination === undefined) {
      // Every queue that holds dead letters.
      const { items } = await client.call(client.api.api.v1.queues.$get());
      const rows: { destination: string; dlq_depth: number; depth: number }[] = [];
      for (const d of items) {
        if (d.kind !== "queue" || d.destination.endsWith(".dlq")) continue;
        if (
          ctx.flags.execution !== undefined &&
          parseScopedDestination(d.destination)?.executionId !== ctx.flags.execution
        )
          continue;
        const stats = await client.call(
          client.api.api.v1.queues.stats.$get({ query: { destination: d.destination } }),
        );
        if (stats.dlq_depth > 0)
          rows.push({ destination: d.destination, dlq_depth: stats.dlq_depth, depth: stats.depth });
      }
      ctx.output.out(
        ctx.flags.json
          ? json(rows)
          : rows.length === 0
            ? "no dead letters"
            : table(
                ["destination", "dead letters", "depth"],
                rows.map((r) => [r.destination, r.dlq_depth, r.depth]),
              ),
      );
      return 0;
    }
    if (sub === "list" || sub === "show") {
      const page = await client.call(
        client.api.api.v1.queues.dlq.$get({
          query: defined({
            destination: destination as string,
            subscription: ctx.flags.subscription,
            limit: sub === "show" ? "500" : ctx.flags.limit,
            offset: ctx.flags.offset,
          }),
        }),
      );
      if (sub === "show") {
        const letter = page.items.find((l) => l.message_id === messageId);
        if (letter === undefined) {
          ctx.output.err(`no dead letter ${messageId} among the first 500 of ${destination}`);
          return 1;
        }
        ctx.output.out(json(letter));
        return 0;
      }
      if (ctx.flags.json) ctx.output.out(json(page));
      else {
        ctx.output.out(
          table(
            ["message", "reason", "attempts", "dead lettered", "last error"],
            page.items.map((l) => [
              l.message_id,
              l.reason,
              l.attempts,
              l.dead_lettered_at,
              (l.last_error ?? "").slice(0, 70),
            ]),
          ),
        );
        ctx.output.out(`${page.items.length} of ${page.total} dead letters in ${destination}`);
      }
      return 0;
    }
    if (sub === "redrive") {
      const result =
        messageId === undefined
          ? await client.call(client.api.api.v1.queues.dlq.redrive.$post({ json: redrive }))
          : await client.call(
              client.api.api.v1.queues.dlq["redrive-one"].$post({
                json: { ...redrive, message_id: messageId },
              }),
            );
      ctx.output.out(ctx.flags.json ? json(result) : `redriven: ${String(result.redriven)}`);
      return 0;
    }
    const result = await client.call(
      client.api.api.v1.queues.dlq.discard.$post({ json: { ...source, message_id: messageId as string } }),
    );
    ctx.output.out(ctx.flags.json ? json(result) : `discarded ${messageId}`);
    return 0;
  } finally {
    await backend.close();
  }
}
