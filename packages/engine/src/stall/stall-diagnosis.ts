import {
  type LineageProtocol,
  OPEN_LINEAGE_STATUSES,
  ProviderError,
  type QueueProtocol,
  type RouteStatusCount,
} from "@factflow/protocols";
import type { ExecutionProgress, RouteActivity } from "../execution/execution-progress.js";
import { scopedDestination } from "../execution/scoped-destination.js";
import { waitingFor } from "./stall-report.js";

/** How long one read of a diagnosis (lineage, one queue's stats) may take before it is left out. */
const READ_TIMEOUT_MS = 5000;

/** One route in a stall diagnosis: what it does here, what the broker and lineage hold for it. */
export interface RouteStall extends RouteActivity {
  /** The route's queue on the broker; absent when the broker did not answer (see `problems`). */
  readonly broker?: {
    /** Messages waiting to be delivered (retries waiting for their delay included where the broker counts them). */
    readonly depth: number;
    /** Messages handed out to a consumer (any process) and not yet settled. */
    readonly inFlight: number;
    readonly deadLetters: number;
  };
  /** The route's message rows in lineage: all of them, and the open ones by status. */
  readonly messages?: { readonly total: number; readonly open: Readonly<Record<string, number>> };
  /** Adapter invocations whose lineage row is still open. */
  readonly openAdapterCalls?: number;
}

/**
 * What a running execution is waiting for: the in-memory progress of its routes, what the broker
 * and lineage hold for it, and sentences that say what would have to happen next.
 */
export interface StallDiagnosis extends Omit<ExecutionProgress, "routes"> {
  readonly routes: readonly RouteStall[];
  readonly lineage: {
    /** Open rows (pending, initiated, processing) committed for the execution; null when unread. */
    readonly openRows: number | null;
    /** Writes queued in this process and not yet committed (every execution's). */
    readonly queuedWrites: number;
  };
  /** The provider's publish counters since connect (every execution of this process). */
  readonly provider: {
    readonly name: string;
    readonly published: number;
    readonly confirmed: number;
  };
  /** What would have to happen for the execution to move on, one sentence each. */
  readonly waitingFor: readonly string[];
  /** Reads that failed or timed out, so the picture is incomplete. */
  readonly problems: readonly string[];
  /** The lineage counts, as one string: equal fingerprints mean no lineage change in between. */
  readonly fingerprint: string;
}

type Read<T> = { readonly value: T } | { readonly problem: string; readonly error?: unknown };

/** `read` within `ms`, or a sentence saying why not. Never rejects. */
async function bounded<T>(read: () => Promise<T>, what: string, ms = READ_TIMEOUT_MS): Promise<Read<T>> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // Not unref'd: a diagnosis asked for while nothing else keeps the process alive must finish.
    const late = new Promise<Read<T>>((resolve) => {
      timer = setTimeout(() => resolve({ problem: `${what} did not answer within ${ms} ms` }), ms);
    });
    return await Promise.race([read().then((value) => ({ value })), late]);
  } catch (error) {
    return { problem: `${what} failed: ${error instanceof Error ? error.message : String(error)}`, error };
  } finally {
    clearTimeout(timer);
  }
}

/** Reads what lineage and the broker hold for the execution and says what it is waiting for. */
export async function diagnoseExecution(
  progress: ExecutionProgress,
  services: { readonly lineage: LineageProtocol; readonly queue: QueueProtocol },
): Promise<StallDiagnosis> {
  const { lineage, queue } = services;
  const { executionId } = progress;
  const [counts, ...stats] = await Promise.all([
    bounded(() => lineage.countsByRoute(executionId), "lineage"),
    ...progress.routes.map((r) =>
      bounded(
        () => queue.admin.stats({ destination: scopedDestination(executionId, r.queue) }),
        `the stats of queue "${r.queue}"`,
      ),
    ),
  ]);
  const problems: string[] = [];
  const rows: readonly RouteStatusCount[] = "value" in counts ? counts.value : [];
  if ("problem" in counts) problems.push(counts.problem);
  const open = new Set<string>(OPEN_LINEAGE_STATUSES);
  const routes = progress.routes.map((activity, index): RouteStall => {
    const stat = stats[index];
    let broker: RouteStall["broker"];
    if (stat !== undefined && "value" in stat)
      broker = { depth: stat.value.depth, inFlight: stat.value.inFlight, deadLetters: stat.value.dlqDepth };
    // A queue nothing was published to may not exist yet: it holds nothing.
    else if (stat !== undefined && stat.error instanceof ProviderError && stat.error.reason === "not-found")
      broker = { depth: 0, inFlight: 0, deadLetters: 0 };
    else if (stat !== undefined) problems.push(stat.problem);
    if (!("value" in counts)) return { ...activity, ...(broker === undefined ? {} : { broker }) };
    const mine = rows.filter((c) => c.route === activity.route);
    const openByStatus: Record<string, number> = {};
    let total = 0;
    let openAdapterCalls = 0;
    for (const c of mine) {
      if (c.kind === "message") {
        total += c.count;
        if (open.has(c.status)) openByStatus[c.status] = (openByStatus[c.status] ?? 0) + c.count;
      } else if (open.has(c.status)) {
        openAdapterCalls += c.count;
      }
    }
    return {
      ...activity,
      ...(broker === undefined ? {} : { broker }),
      messages: { total, open: openByStatus },
      openAdapterCalls,
    };
  });
  const durability = queue.counters();
  const diagnosis: Omit<StallDiagnosis, "waitingFor"> = {
    ...progress,
    routes,
    lineage: {
      openRows:
        "value" in counts ? rows.filter((c) => open.has(c.status)).reduce((n, c) => n + c.count, 0) : null,
      queuedWrites: lineage.counters().queued,
    },
    provider: { name: queue.name, published: durability.published, confirmed: durability.confirmed },
    problems,
    fingerprint: JSON.stringify(
      [...rows].sort((a, b) =>
        `${a.route}/${a.kind}/${a.status}`.localeCompare(`${b.route}/${b.kind}/${b.status}`),
      ),
    ),
  };
  return { ...diagnosis, waitingFor: waitingFor(diagnosis) };
}
