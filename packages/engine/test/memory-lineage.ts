import type {
  LineageCounters,
  LineageProtocol,
  LineageRow,
  LineageStatus,
  RecordedInput,
  RouteStatusCount,
} from "@factflow/protocols";

const OPEN = new Set<LineageStatus>(["pending", "initiated", "processing"]);

/**
 * A lineage store that commits instantly, in memory: the fastest store the engine can meet, so
 * races between the engine and the provider (completion before a settlement) show up in tests.
 */
export function memoryLineage(): LineageProtocol {
  const rows = new Map<string, LineageRow>();
  const counters: LineageCounters = { written: 0, retriedWrites: 0, lost: 0, queued: 0 };
  const of = (executionId: string) => [...rows.values()].filter((r) => r.executionId === executionId);
  return {
    record(row) {
      rows.set(row.id, row);
      counters.written++;
    },
    update(id, update) {
      const row = rows.get(id);
      if (row !== undefined) rows.set(id, { ...row, ...update });
      counters.written++;
    },
    async registerPending(list) {
      for (const row of list) rows.set(row.id, row);
      counters.written += list.length;
    },
    flush: async () => {},
    countOpen: async (executionId) => of(executionId).filter((r) => OPEN.has(r.status)).length,
    counters: () => ({ ...counters }),
    async rows(executionId, query = {}) {
      const all = of(executionId).filter(
        (r) =>
          (query.status === undefined || r.status === query.status) &&
          (query.route === undefined || r.route === query.route) &&
          (query.kind === undefined || r.kind === query.kind),
      );
      const offset = query.offset ?? 0;
      return { total: all.length, items: all.slice(offset, offset + (query.limit ?? 50)) };
    },
    async countsByRoute(executionId) {
      const counts = new Map<string, RouteStatusCount>();
      for (const r of of(executionId)) {
        const key = `${r.route}\n${r.kind}\n${r.status}`;
        const seen = counts.get(key);
        counts.set(key, { route: r.route, kind: r.kind, status: r.status, count: (seen?.count ?? 0) + 1 });
      }
      return [...counts.values()];
    },
    async tree(executionId, messageId) {
      return { items: of(executionId).filter((r) => r.messageId === messageId), truncated: false };
    },
    async routeInputs(executionId, route, messageIds) {
      const inputs: RecordedInput[] = [];
      for (const r of of(executionId)) {
        if (r.kind !== "message" || r.route !== route) continue;
        if (messageIds !== undefined && !messageIds.includes(r.messageId)) continue;
        inputs.push({ messageId: r.messageId, correlationId: r.correlationId, payload: r.payload ?? null });
      }
      return inputs;
    },
    async messageStatus(executionId, messageId) {
      const row = of(executionId).find((r) => r.kind === "message" && r.messageId === messageId);
      return row === undefined ? undefined : { status: row.status, attempt: row.attempt };
    },
    close: async () => {},
  };
}
