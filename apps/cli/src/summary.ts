import { scopedDestination } from "@factflow/engine";
import type { ExecutionRecord } from "@factflow/protocols";
import type { FactflowRuntime } from "@factflow/runtime";
import { formatDuration, table } from "./output.js";
import { routeOrder } from "./route-order.js";

/** Per-route figures of a finished execution. */
export interface RouteSummary {
  readonly route: string;
  readonly queue: string;
  /** Messages addressed to the route (lineage message rows). */
  readonly messages: number;
  readonly completed: number;
  readonly failed: number;
  /** Adapter invocations that failed (each failed attempt counts). */
  readonly adapter_failures: number;
  readonly retries: number;
  readonly dead_letters: number;
}

export interface ExecutionSummary {
  readonly id: string;
  readonly config: string;
  readonly status: ExecutionRecord["status"];
  readonly error: string | null;
  readonly duration_ms: number | null;
  readonly provider: string;
  readonly routes: readonly RouteSummary[];
  readonly failures: number;
  readonly dead_letters: number;
  /** False when the provider keeps nothing past this process (embedded memory mode). */
  readonly dead_letters_kept: boolean;
  readonly lineage_rows: number;
  readonly artefacts: { readonly count: number; readonly location: string; readonly keys: readonly string[] };
}

/** Collects the summary of a finished execution from lineage, the provider admin and storage. */
export async function summarize(rt: FactflowRuntime, id: string): Promise<ExecutionSummary> {
  const record = await rt.executions.getExecution(id, { includeInput: false });
  if (record === undefined) throw new Error(`execution ${id} does not exist`);
  const counts = await rt.lineage.countsByRoute(id);
  const routes: RouteSummary[] = [];
  for (const route of routeOrder(record.configSnapshot)) {
    const spec = record.configSnapshot.routes[route];
    if (spec === undefined) continue;
    const of = (kind: string, status?: string) =>
      counts
        .filter((c) => c.route === route && c.kind === kind && (status === undefined || c.status === status))
        .reduce((n, c) => n + c.count, 0);
    let deadLetters = 0;
    try {
      deadLetters = (
        await rt.provider.admin.stats({ destination: scopedDestination(id, spec.inbound.queue) })
      ).dlqDepth;
    } catch {
      deadLetters = await rt.metrics.valueOf(rt.metrics.deadLetters, { route });
    }
    routes.push({
      route,
      queue: spec.inbound.queue,
      messages: of("message"),
      completed: of("message", "completed"),
      failed: of("message", "failed"),
      adapter_failures: of("adapter", "failed"),
      retries: await rt.metrics.valueOf(rt.metrics.retries, { route }),
      dead_letters: deadLetters,
    });
  }
  const keys: string[] = [];
  for (let offset = 0; ; offset += 500) {
    const page = await rt.lineage.rows(id, { kind: "adapter", status: "completed", offset, limit: 500 });
    for (const row of page.items) keys.push(...(row.outputKeys ?? []));
    if (page.items.length < 500) break;
  }
  const lineageRows = (await rt.lineage.rows(id, { limit: 1 })).total;
  return {
    id,
    config: record.configName,
    status: record.status,
    error: record.error,
    duration_ms:
      record.finishedAt === null ? null : Date.parse(record.finishedAt) - Date.parse(record.createdAt),
    provider: rt.provider.name,
    routes,
    failures: routes.reduce((n, r) => n + r.adapter_failures, 0),
    dead_letters: routes.reduce((n, r) => n + r.dead_letters, 0),
    dead_letters_kept: rt.provider.capabilities.durable,
    lineage_rows: lineageRows,
    artefacts: { count: keys.length, location: rt.storage.describe(), keys: keys.sort() },
  };
}

/** The human-readable summary. */
export function renderSummary(s: ExecutionSummary): string {
  const lines: string[] = [];
  const took = s.duration_ms === null ? "" : ` in ${formatDuration(s.duration_ms)}`;
  lines.push(`execution ${s.id} ${s.status}${took} (config ${s.config}, provider ${s.provider})`);
  if (s.error !== null) lines.push(`error: ${s.error}`);
  lines.push(
    "",
    table(
      ["route", "messages", "completed", "failed", "adapter failures", "retries", "dead letters"],
      s.routes.map((r) => [
        r.route,
        r.messages,
        r.completed,
        r.failed,
        r.adapter_failures,
        r.retries,
        r.dead_letters,
      ]),
    ),
    "",
  );
  lines.push(
    `failures:     ${s.failures} failed adapter invocations${s.failures > 0 ? ` (factflow lineage ${s.id} --status failed)` : ""}`,
  );
  const dlq = s.routes.filter((r) => r.dead_letters > 0);
  const where =
    s.dead_letters === 0
      ? ""
      : s.dead_letters_kept
        ? dlq.map((r) => ` (factflow dlq list --execution ${s.id} --queue ${r.queue})`).join("")
        : " (held in this process's memory only: they are gone when it exits; run with FACTFLOW_EMBEDDED_MODE=file to keep them)";
  lines.push(`dead letters: ${s.dead_letters}${where}`);
  const prefix = commonPrefix(s.artefacts.keys);
  const stored =
    s.artefacts.count === 0
      ? ""
      : ` written${prefix === "" ? "" : ` under ${prefix}`} (${s.artefacts.location})`;
  lines.push(`artefacts:    ${s.artefacts.count}${stored}`);
  lines.push(`lineage:      ${s.lineage_rows} rows (factflow lineage ${s.id})`);
  return lines.join("\n");
}

function commonPrefix(keys: readonly string[]): string {
  if (keys.length === 0) return "";
  let prefix = keys[0] ?? "";
  for (const key of keys) while (!key.startsWith(prefix)) prefix = prefix.slice(0, -1);
  return prefix.slice(0, prefix.lastIndexOf("/") + 1);
}
