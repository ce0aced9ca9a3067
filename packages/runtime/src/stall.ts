import type { RouteStall, StallDiagnosis } from "@factflow/engine";
import type { ExecutionRecord, Logger } from "@factflow/protocols";

function routeJson(r: RouteStall) {
  return {
    route: r.route,
    queue: r.queue,
    in_flight: r.inFlight,
    waiting_for_slot: r.waitingForSlot,
    publishing: r.publishing,
    outputs_pending: r.outputsPending,
    held: r.held,
    paused: r.paused,
    counters: {
      acknowledged: r.counters.acknowledged,
      failed: r.counters.failed,
      rejected: r.counters.rejected,
      abandoned: r.counters.abandoned,
      published: r.counters.published,
      duplicates: r.counters.duplicates,
      skipped: r.counters.skipped,
    },
    broker:
      r.broker === undefined
        ? null
        : { depth: r.broker.depth, in_flight: r.broker.inFlight, dead_letters: r.broker.deadLetters },
    messages: r.messages ?? null,
    open_adapter_calls: r.openAdapterCalls ?? null,
  };
}

/**
 * A stall diagnosis as the API and `factflow run --json` show it (snake_case, like the rest of the
 * API): what the execution waits for, then the figures it was read from.
 */
export function stallJson(d: StallDiagnosis) {
  return {
    quiet_ms: d.quietMs,
    last_progress_at: d.lastProgressAt,
    phase: d.phase,
    waiting_for: d.waitingFor,
    seed_pending: d.seedPending,
    routes: d.routes.map(routeJson),
    lineage: { open_rows: d.lineage.openRows, queued_writes: d.lineage.queuedWrites },
    provider: d.provider,
    problems: d.problems,
  };
}

/** The server's answer to a stall: one warning per stall, with what the execution waits for. */
export function logStall(logger: Logger) {
  return (record: ExecutionRecord, d: StallDiagnosis): void => {
    logger.warn(
      `execution has made no progress for ${Math.round(d.quietMs / 1000)} s; waiting for: ${d.waitingFor.join("; ")}`,
      {
        executionId: record.id,
        config: record.configName,
        stall: stallJson(d),
      },
    );
  };
}
