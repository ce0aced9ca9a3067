import { type ApiClient, ApiError } from "../api-client.js";
import { type CliContext, openBackend, UsageError } from "../context.js";
import { json, table } from "../output.js";
import { ProgressDisplay, type RouteProgress } from "../progress.js";
import { routeOrder } from "../route-order.js";
import { pruneExecutions } from "./executions-prune.js";

/** An execution as `GET /api/v1/executions/{id}` answers: the route's own type, through `hc<AppType>`. */
type Execution = Awaited<ReturnType<typeof getExecution>>;

type ExecutionStatus = "running" | "completed" | "failed" | "cancelled";

/** `params` without its undefined entries (query parameters that were not given). */
export function defined<T extends Record<string, string | undefined>>(params: T): T {
  return Object.fromEntries(Object.entries(params).filter((e) => e[1] !== undefined)) as T;
}

/** `GET /api/v1/executions/{id}` through the typed client (`snapshot` adds the frozen config). */
export function getExecution(client: ApiClient, id: string, options: { snapshot?: boolean } = {}) {
  const query = options.snapshot === true ? { snapshot: "true" as const } : {};
  return client.call(client.api.api.v1.executions[":id"].$get({ param: { id }, query }));
}

/** Follows the SSE stream of an execution until it ends; returns the final status. */
export async function watchExecution(ctx: CliContext, client: ApiClient, id: string): Promise<string> {
  let status = "running";
  const display = ctx.flags.json ? undefined : new ProgressDisplay(ctx.output, []);
  await client.followEvents(`/api/v1/executions/${id}/events`, (event) => {
    const data = JSON.parse(event.data) as Record<string, unknown>;
    if (ctx.flags.json) ctx.output.out(JSON.stringify({ id: event.id, type: event.event, data }));
    else if (event.event === "route_progress")
      display?.update((data.routes as Record<string, RouteProgress>) ?? {});
    else if (event.event !== "started")
      ctx.output.out(`${event.event}${data.error ? `: ${String(data.error)}` : ""}`);
    if (["completed", "failed", "cancelled"].includes(event.event)) {
      status = event.event;
      return true;
    }
    return false;
  });
  display?.finish();
  return status;
}

export function showExecution(ctx: CliContext, e: Execution): void {
  if (ctx.flags.json) {
    const { config_snapshot: _snapshot, ...rest } = e;
    ctx.output.out(json(rest));
    return;
  }
  const lines = [
    `execution  ${e.id}`,
    `status     ${e.status}${e.error ? ` (${e.error})` : ""}`,
    `config     ${e.config_name}${e.config_version === null ? "" : ` v${e.config_version}`}`,
    `created    ${e.created_at}`,
    `finished   ${e.finished_at ?? "-"}`,
  ];
  if (e.parent_execution_id !== null)
    lines.push(`replay of  ${e.parent_execution_id} from route ${e.replay_from_route}`);
  ctx.output.out(lines.join("\n"));
  if (e.routes !== undefined) {
    const order = e.config_snapshot === undefined ? Object.keys(e.routes) : routeOrder(e.config_snapshot);
    const counts = order.flatMap((name) =>
      e.routes?.[name] === undefined ? [] : [[name, e.routes[name]] as const],
    );
    const rows = counts.map(([route, c]) => [
      route,
      Object.values(c.messages).reduce((a, b) => a + b, 0),
      c.messages.completed ?? 0,
      c.messages.failed ?? 0,
      (c.messages.pending ?? 0) + (c.messages.processing ?? 0) + (c.messages.initiated ?? 0),
      c.adapters.failed ?? 0,
    ]);
    ctx.output.out(
      `\n${table(["route", "messages", "completed", "failed", "open", "adapter failures"], rows)}`,
    );
  }
}

/** `factflow executions list|show|watch|cancel|resume|prune`. */
export async function executionsCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const [sub, id] = args;
  if (sub === "prune") return pruneExecutions(ctx);
  if (sub === undefined || !["list", "show", "watch", "cancel", "resume"].includes(sub)) {
    throw new UsageError(
      "usage: factflow executions list|show ID|watch ID|cancel ID|resume ID|prune --older-than-days N",
    );
  }
  if (sub !== "list" && id === undefined)
    throw new UsageError(`factflow executions ${sub} needs an execution id`);
  const backend = await openBackend(ctx);
  try {
    const { client } = backend;
    if (sub === "list") {
      const page = await client.call(
        client.api.api.v1.executions.$get({
          query: defined({
            // The server checks the status and answers 400 naming the allowed ones.
            status: ctx.flags.status as ExecutionStatus | undefined,
            config: ctx.flags.config,
            limit: ctx.flags.limit,
            offset: ctx.flags.offset,
          }),
        }),
      );
      if (ctx.flags.json) ctx.output.out(json(page));
      else {
        ctx.output.out(
          table(
            ["id", "status", "config", "created", "finished"],
            page.items.map((e) => [e.id, e.status, e.config_name, e.created_at, e.finished_at]),
          ),
        );
        ctx.output.out(`${page.items.length} of ${page.total}`);
      }
      return 0;
    }
    const target = id as string;
    if (sub === "show") {
      showExecution(ctx, await getExecution(client, target, { snapshot: true }));
      return 0;
    }
    if (sub === "cancel") {
      const result = await client.call(
        client.api.api.v1.executions[":id"].cancel.$post({ param: { id: target } }),
      );
      ctx.output.out(
        ctx.flags.json
          ? json(result)
          : result.cancelled
            ? `cancelled ${target}`
            : `${target} is already ${result.status}`,
      );
      return 0;
    }
    if (sub === "resume") {
      // Here (in process, on the local data directory) or on --server: continue it, then follow it
      // to its end. In process it lives as long as this command.
      const resumed = await client.call(
        client.api.api.v1.executions[":id"].resume.$post({ param: { id: target } }),
      );
      if (!ctx.flags.json) ctx.output.out(`resumed ${resumed.id}`);
      const status = await watchExecution(ctx, client, target);
      return status === "completed" ? 0 : 1;
    }
    if (backend.runtime !== undefined && (await getExecution(client, target)).status === "running") {
      throw new UsageError(
        "this execution is not running in this process; watch it with --server pointing at the server that runs it",
      );
    }
    const status = await watchExecution(ctx, client, target);
    return status === "completed" ? 0 : 1;
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) {
      ctx.output.err(error.message);
      return 1;
    }
    throw error;
  } finally {
    await backend.close();
  }
}
