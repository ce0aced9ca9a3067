import type {
  LineageCounters,
  LineagePageQuery,
  LineageProtocol,
  LineageRow,
  LineageStatus,
  LineageTree,
  LineageTreeQuery,
  LineageUpdate,
  RecordedInput,
  RouteStatusCount,
} from "@factflow/protocols";
import { FactflowError } from "@factflow/protocols";
import { assertUuid, pageOf } from "./ids.js";
import {
  checkMessageId,
  checkRow,
  checkRowOfKnownExecution,
  invalid,
  LINEAGE_KINDS,
  LINEAGE_STATUSES,
  treeLimitOf,
} from "./row-checks.js";

/**
 * A row as this store keeps it: every field present (absent ones `undefined`), so all rows share one
 * shape and an update never changes it, and a link to its execution's entry, so an update needs no
 * second lookup. {@link toRow} gives callers the plain `LineageRow` back.
 */
class StoredRow {
  id: string;
  executionId: string;
  kind: LineageRow["kind"];
  route: string;
  adapter: string | undefined;
  adapterIndex: number | undefined;
  messageId: string;
  correlationId: string;
  parentId: string | undefined;
  attempt: number;
  status: LineageStatus;
  inputHash: string | undefined;
  payload: LineageRow["payload"];
  outputKeys: readonly string[] | undefined;
  error: LineageRow["error"];
  startedAt: string;
  finishedAt: string | undefined;
  owner: ExecutionRows;

  constructor(row: LineageRow, owner: ExecutionRows) {
    this.id = row.id;
    this.executionId = row.executionId;
    this.kind = row.kind;
    this.route = row.route;
    this.adapter = row.adapter;
    this.adapterIndex = row.adapterIndex;
    this.messageId = row.messageId;
    this.correlationId = row.correlationId;
    this.parentId = row.parentId;
    this.attempt = row.attempt;
    this.status = row.status;
    this.inputHash = row.inputHash;
    this.payload = row.payload;
    this.outputKeys = row.outputKeys;
    this.error = row.error;
    this.startedAt = row.startedAt;
    this.finishedAt = row.finishedAt;
    this.owner = owner;
  }
}

/** The plain row of a stored one: the fields it has, as the database stores return them. */
function toRow(stored: StoredRow): LineageRow {
  const row: { -readonly [K in keyof LineageRow]: LineageRow[K] } = {
    id: stored.id,
    executionId: stored.executionId,
    kind: stored.kind,
    route: stored.route,
    messageId: stored.messageId,
    correlationId: stored.correlationId,
    attempt: stored.attempt,
    status: stored.status,
    startedAt: stored.startedAt,
  };
  if (stored.adapter !== undefined) row.adapter = stored.adapter;
  if (stored.adapterIndex !== undefined) row.adapterIndex = stored.adapterIndex;
  if (stored.parentId !== undefined) row.parentId = stored.parentId;
  if (stored.inputHash !== undefined) row.inputHash = stored.inputHash;
  if (stored.payload !== undefined) row.payload = stored.payload;
  if (stored.outputKeys !== undefined) row.outputKeys = stored.outputKeys;
  if (stored.error !== undefined) row.error = stored.error;
  if (stored.finishedAt !== undefined) row.finishedAt = stored.finishedAt;
  return row;
}

const OPEN: ReadonlySet<LineageStatus> = new Set(["pending", "initiated", "processing"]);
const RANK: Record<LineageStatus, number> = {
  pending: 0,
  initiated: 1,
  processing: 2,
  completed: 3,
  failed: 3,
  abandoned: 3,
  skipped: 3,
};

/**
 * The row ids of one execution, in the order they were first written, with its open-row count kept
 * up to date on every write. The rows themselves are in the store's one id → row map (the id is
 * the key, as in the database tables).
 */
interface ExecutionRows {
  readonly ids: string[];
  open: number;
}

/**
 * `LineageProtocol` held in this process's memory: every write applies at once, nothing is persisted
 * and everything is gone when the process exits. Completion semantics are those of the database
 * stores (a row is open until updated to completed/failed/abandoned; `countOpen` is exact), so the
 * engine behaves the same; only durability and cross-process visibility are given up. Meant for
 * ephemeral runs, tests and benchmarks (`lineage: memory`).
 */
export class MemoryLineageStore implements LineageProtocol {
  readonly #executions = new Map<string, ExecutionRows>();
  /** Every row by id, so `update(id)` finds its row without knowing the execution. */
  readonly #rows = new Map<string, StoredRow>();
  readonly #counters: LineageCounters = { written: 0, retriedWrites: 0, lost: 0, queued: 0 };
  #closed = false;

  record(row: LineageRow): void {
    this.#open();
    this.#check(row);
    this.#put(row);
  }

  update(id: string, update: LineageUpdate): void {
    this.#open();
    if (!LINEAGE_STATUSES.has(update.status))
      invalid(`lineage status ${JSON.stringify(update.status)} is unknown`);
    const row = this.#rows.get(id);
    // Like an UPDATE matching no row: nothing to change (the database stores behave the same). A
    // stored row's id was checked when it was recorded; only an unknown one can be malformed.
    if (row === undefined) {
      assertUuid(id, "lineage row id");
      return;
    }
    const owner = row.owner;
    const wasOpen = OPEN.has(row.status);
    row.status = update.status;
    if (update.outputKeys !== undefined) row.outputKeys = update.outputKeys;
    if (update.error !== undefined) row.error = update.error;
    if (update.finishedAt !== undefined) row.finishedAt = update.finishedAt;
    if (update.attempt !== undefined) row.attempt = update.attempt;
    owner.open += (OPEN.has(row.status) ? 1 : 0) - (wasOpen ? 1 : 0);
    this.#counters.written++;
  }

  async registerPending(rows: readonly LineageRow[]): Promise<void> {
    this.#open();
    for (const row of rows) this.#check(row);
    for (const row of rows) this.#put(row);
  }

  async flush(): Promise<void> {}

  async countOpen(executionId: string): Promise<number> {
    assertUuid(executionId, "execution id");
    return this.#executions.get(executionId)?.open ?? 0;
  }

  counters(): LineageCounters {
    return { ...this.#counters };
  }

  async rows(executionId: string, query: LineagePageQuery = {}) {
    assertUuid(executionId, "execution id");
    const { offset, limit } = pageOf(query);
    if (query.kind !== undefined && !LINEAGE_KINDS.has(query.kind))
      invalid(`lineage kind ${JSON.stringify(query.kind)} is unknown`);
    if (query.status !== undefined && !LINEAGE_STATUSES.has(query.status))
      invalid(`lineage status ${JSON.stringify(query.status)} is unknown`);
    const matching = this.#all(executionId).filter(
      (r) =>
        (query.status === undefined || r.status === query.status) &&
        (query.route === undefined || r.route === query.route) &&
        (query.kind === undefined || r.kind === query.kind),
    );
    return {
      total: matching.length,
      items: sorted(matching)
        .slice(offset, offset + limit)
        .map(toRow),
    };
  }

  async countsByRoute(executionId: string): Promise<readonly RouteStatusCount[]> {
    assertUuid(executionId, "execution id");
    const counts = new Map<
      string,
      { route: string; kind: LineageRow["kind"]; status: LineageStatus; count: number }
    >();
    for (const r of this.#all(executionId)) {
      const key = `${r.route}\u0000${r.kind}\u0000${r.status}`;
      const seen = counts.get(key);
      if (seen === undefined) counts.set(key, { route: r.route, kind: r.kind, status: r.status, count: 1 });
      else seen.count++;
    }
    return [...counts.values()].sort(
      (a, b) => compare(a.route, b.route) || compare(a.kind, b.kind) || compare(a.status, b.status),
    );
  }

  async tree(executionId: string, messageId: string, query?: LineageTreeQuery): Promise<LineageTree> {
    assertUuid(executionId, "execution id");
    checkMessageId(messageId);
    const limit = treeLimitOf(query);
    if (!this.#executions.has(executionId)) return { items: [], truncated: false };
    const all = this.#all(executionId);
    const rows = new Map(all.map((r) => [r.id, r]));
    const byMessage = new Map<string, StoredRow[]>();
    const byParent = new Map<string, StoredRow[]>();
    for (const r of all) {
      push(byMessage, r.messageId, r);
      if (r.parentId !== undefined) push(byParent, r.parentId, r);
    }
    const start = byMessage.get(messageId) ?? [];
    if (start.length === 0) return { items: [], truncated: false };
    // Up: from each row reached, its parent and the message rows of its message (an adapter row's
    // chain of parents ends at its message's first adapter row; the message row leads further up),
    // to the root; every row of an ancestor message is in.
    const upMessages = new Set<string>();
    const upSeen = new Set<string>();
    const upStack = [...start];
    while (upStack.length > 0) {
      const r = upStack.pop() as StoredRow;
      if (upSeen.has(r.id)) continue;
      upSeen.add(r.id);
      const parent = r.parentId === undefined ? undefined : rows.get(r.parentId);
      if (parent !== undefined) upStack.push(parent);
      if (upMessages.has(r.messageId)) continue;
      upMessages.add(r.messageId);
      for (const sibling of byMessage.get(r.messageId) ?? [])
        if (sibling.kind === "message") upStack.push(sibling);
    }
    // Every row of the message and of the messages it descends from is in, whatever the limit.
    const ids = new Set<string>();
    for (const m of upMessages) for (const r of byMessage.get(m) ?? []) ids.add(r.id);
    // Down, breadth-first: rows whose parent is in the tree, and every row of a message already in
    // it, until the tree holds `limit` rows.
    const seenMessages = new Set(upMessages);
    const queue = [...start];
    const seen = new Set(start.map((r) => r.id));
    let truncated = false;
    for (let i = 0; i < queue.length; i++) {
      const r = queue[i] as StoredRow;
      if (!ids.has(r.id)) {
        if (ids.size >= limit) {
          truncated = true;
          break;
        }
        ids.add(r.id);
      }
      const next = [...(byParent.get(r.id) ?? [])];
      if (!seenMessages.has(r.messageId)) {
        seenMessages.add(r.messageId);
        next.push(...(byMessage.get(r.messageId) ?? []));
      }
      for (const n of next) {
        if (seen.has(n.id)) continue;
        seen.add(n.id);
        queue.push(n);
      }
    }
    return { items: sorted(all.filter((r) => ids.has(r.id))).map(toRow), truncated };
  }

  async routeInputs(
    executionId: string,
    route: string,
    messageIds?: readonly string[],
  ): Promise<readonly RecordedInput[]> {
    assertUuid(executionId, "execution id");
    if (messageIds !== undefined && messageIds.length === 0) return [];
    for (const id of messageIds ?? []) checkMessageId(id);
    const wanted = messageIds === undefined ? undefined : new Set(messageIds);
    // One input per message (a redelivered message may have several rows): its first recording.
    const first = new Map<string, StoredRow>();
    for (const r of sorted(this.#all(executionId))) {
      if (r.kind !== "message" || r.route !== route) continue;
      if (wanted !== undefined && !wanted.has(r.messageId)) continue;
      if (!first.has(r.messageId)) first.set(r.messageId, r);
    }
    return [...first.values()].map((r) => ({
      messageId: r.messageId,
      correlationId: r.correlationId,
      payload: r.payload ?? null,
    }));
  }

  async messageStatus(executionId: string, messageId: string) {
    assertUuid(executionId, "execution id");
    if (typeof messageId !== "string" || messageId.length === 0 || messageId.length > 512) return undefined;
    let best: StoredRow | undefined;
    for (const r of this.#all(executionId)) {
      if (r.kind !== "message" || r.messageId !== messageId) continue;
      if (best === undefined || r.attempt > best.attempt) best = r;
    }
    return best === undefined ? undefined : { status: best.status, attempt: best.attempt };
  }

  /** Forgets the rows of these executions (retention in the companion execution store). */
  forget(executionIds: Iterable<string>): void {
    for (const id of executionIds) {
      const execution = this.#executions.get(id);
      if (execution === undefined) continue;
      for (const rowId of execution.ids)
        if (this.#rows.get(rowId)?.executionId === id) this.#rows.delete(rowId);
      this.#executions.delete(id);
    }
  }

  /** Later writes throw `lineage_error`; queries still answer until the process exits. */
  async close(): Promise<void> {
    this.#closed = true;
  }

  #open(): void {
    if (this.#closed)
      throw new FactflowError("lineage_error", "[factflow/lineage] the in-memory lineage store is closed.");
  }

  #all(executionId: string): StoredRow[] {
    const execution = this.#executions.get(executionId);
    if (execution === undefined) return [];
    const out: StoredRow[] = [];
    const seen = new Set<string>();
    for (const id of execution.ids) {
      const row = this.#rows.get(id);
      // Skips a row id rewritten under another execution (an upsert moves it, as in the database)
      // and the second entry of one that came back.
      if (row === undefined || row.executionId !== executionId || seen.has(id)) continue;
      seen.add(id);
      out.push(row);
    }
    return out;
  }

  /** `checkRow`, except that an execution id this store already holds was checked before. */
  #check(row: LineageRow): void {
    if (this.#executions.has(row.executionId)) checkRowOfKnownExecution(row);
    else checkRow(row);
  }

  /** Insert, or the database stores' upsert: a stored row is only replaced by one at least as far along. */
  #put(row: LineageRow): void {
    let execution = this.#executions.get(row.executionId);
    if (execution === undefined) {
      execution = { ids: [], open: 0 };
      this.#executions.set(row.executionId, execution);
    }
    const stored = this.#rows.get(row.id);
    if (stored === undefined) {
      execution.ids.push(row.id);
    } else {
      const newer =
        row.attempt > stored.attempt ||
        (row.attempt === stored.attempt && RANK[row.status] >= RANK[stored.status]);
      if (!newer) return;
      const previous = stored.owner;
      if (OPEN.has(stored.status)) previous.open--;
      if (previous !== execution) execution.ids.push(row.id);
    }
    this.#rows.set(row.id, new StoredRow(row, execution));
    if (OPEN.has(row.status)) execution.open++;
    this.#counters.written++;
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Database order: by start time, then id. */
function sorted(rows: StoredRow[]): StoredRow[] {
  return rows.sort((a, b) => compare(a.startedAt, b.startedAt) || compare(a.id, b.id));
}
