import type { LineageCounters, LineageRow, LineageStatus, LineageUpdate, Logger } from "@factflow/protocols";
import { FactflowError } from "@factflow/protocols";
import { LRUCache } from "lru-cache";
import { BatchCommitter, type WriteCounters } from "./batch-committer.js";
import { type PendingRow, type PendingUpdate, toPendingRow } from "./lineage-sql.js";
import { isOpenStatus, OpenRowHold, OpenRowHolds } from "./open-row-hold.js";
import type { LineageSqlRunner } from "./sql-runner.js";

/** Tuning of the group-commit writer. */
export interface LineageWriterOptions {
  /** How long the first write after an idle period waits for company before a commit. @default 5 */
  readonly intervalMs?: number;
  /** Rows (and, separately, updates) per commit. @default 2000 */
  readonly batchSize?: number;
  /**
   * Queued rows + updates beyond which new writes are refused and counted as `lost` (and logged).
   * Only reached when the database is down or far slower than the pipeline. @default 200000
   */
  readonly maxQueued?: number;
  /** Attempts per batch before its writes are counted lost. @default 6 */
  readonly attempts?: number;
  /** Delay before the first retry, doubled each time up to `maxRetryDelayMs`. @default 100 */
  readonly retryDelayMs?: number;
  /** @default 2000 */
  readonly maxRetryDelayMs?: number;
  /** A commit taking longer than this counts as failed (and the writer's pool is replaced). @default 30000 */
  readonly attemptTimeoutMs?: number;
  /**
   * On a runner without a connection of its own for the pending lane (PGlite): how long after its
   * last `registerPending` the lane counts as in use, which keeps the bulk lane to one batch in
   * flight, so its commits wait behind one bulk batch at most (only the first registration after a
   * quiet spell can find two queued). @default 250
   */
  readonly laneQuietMs?: number;
  /**
   * How long a `record`ed row that is still open (`pending`, `initiated`, `processing`) is kept in
   * memory before it is written. A row that settles within it is written once, already settled; one
   * still open then is written open and updated when it settles. 0 writes every row at once.
   *
   * A held row is memory only. The engine makes that crash-safe by awaiting {@link flushQueued}
   * before the broker settles a delivery (`HandlerResult.settleAfter`): a settled row has left the
   * hold and is committed before its message is acknowledged, and a row still held belongs to a
   * message the broker still holds (and hands out again after a crash; the consumer then records it
   * anew). A writer used without that wait should set 0.
   * @default 250
   */
  readonly holdOpenMs?: number;
  /**
   * How long a message row still `pending` (its message waits in a queue; no hop runs it yet) is kept
   * in memory, at least `holdOpenMs` (0 there holds nothing at all). A queue with a backlog makes
   * messages wait longer than `holdOpenMs` though their hops are quick: held this long, their rows
   * are still written once. When its hop starts (`processing`), the row has `holdOpenMs` from then.
   * What this costs a crash is as for `holdOpenMs`: the broker still holds the message.
   * @default 5000
   */
  readonly holdWaitingMs?: number;
  /**
   * Open rows held at once at most. A row recorded open beyond it is queued at once (written open,
   * updated when it settles), so it counts in the backlog `roomFor` bounds: a fan-out of hundreds of
   * thousands of children, none of which can settle within the hold, then waits for the database
   * instead of filling memory until `maxQueued` drops writes. @default 20000
   */
  readonly maxHeld?: number;
}

/** A `flush` or `registerPending` caller: resolved once this many writes of its lane were taken and committed. */
interface Waiter {
  inserts: number;
  updates: number;
  resolve: () => void;
}

/** A `roomFor` caller: resolved once at most `limit` writes are queued. */
interface RoomWaiter {
  readonly limit: number;
  readonly resolve: () => void;
}

/**
 * Queues lineage writes in memory and group-commits them, in two lanes:
 *
 * - the bulk lane takes `record`/`update`: a row recorded and then updated before its batch leaves
 *   is written once; rows go out as one multi-row upsert and updates as one batched UPDATE per
 *   commit; two batches may be in flight at once (side by side on a connection pool of their own,
 *   queued one behind the other on a shared connection while the pending lane is quiet), but never
 *   two writes of one row: a batch stops before the first queued write whose row is in flight, so
 *   one row's changes apply in order;
 * - the pending lane takes `registerPending` rows, which a caller awaits before publishing: they
 *   are group-committed on their own (on their own connection where the runner offers one), so
 *   their latency is one small commit, not the bulk batches queued ahead of them.
 *
 * One id is in at most one lane at a time; a `record`/`update` of a row whose pending-lane commit is
 * in flight waits (in memory) for that commit, then joins the bulk lane. Failures are retried with
 * backoff, then counted as lost and logged; they never reach the caller.
 */
export class LineageWriter {
  readonly #log: Logger;
  readonly #intervalMs: number;
  readonly #batchSize: number;
  readonly #maxQueued: number;
  readonly #maxHeld: number;
  readonly #bulk: BatchCommitter;
  readonly #lane: BatchCommitter;
  /** The pending lane shares the bulk lane's connection (PGlite): bulk batches then yield to it. */
  readonly #laneShared: boolean;
  readonly #counters: WriteCounters = { written: 0, retriedWrites: 0, lost: 0 };
  #closed = false;
  #overflowing = false;

  // Bulk lane.
  #inserts = new Map<string, PendingRow>();
  #updates = new Map<string, PendingUpdate>();
  #waiters: Waiter[] = [];
  /** Ids of the rows in bulk batches in flight (disjoint between batches). */
  #inFlight = new Set<string>();
  #draining: Promise<void> | undefined;
  /** Bulk commits in flight (at most `#bulkWidthNow()`). */
  #bulkFlights = new Set<Promise<void>>();
  /** Settles once every bulk batch taken so far is committed (or counted lost). */
  #bulkTail: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;

  // Pending lane.
  #laneRows = new Map<string, PendingRow>();
  #laneWaiters: Waiter[] = [];
  #laneInFlight = new Set<string>();
  #laneDraining: Promise<void> | undefined;
  /** Pending-lane commits in flight (at most `#laneWidth`, each of distinct ids). */
  #laneFlights = new Set<Promise<void>>();
  /** Settles once every pending-lane batch taken so far is committed (or counted lost). */
  #laneTail: Promise<void> = Promise.resolve();
  readonly #laneWidth: number;
  readonly #laneQuietMs: number;
  /** When a caller last registered rows in the pending lane (`performance.now()`). */
  #laneUsedAt = Number.NEGATIVE_INFINITY;
  /** Bulk writes of rows whose pending-lane commit is in flight, replayed in order once it ends. */
  #deferred = new Map<string, (() => void)[]>();
  #deferredCount = 0;
  /** `roomFor` callers, released as commits take writes off the queue. */
  #roomWaiters: RoomWaiter[] = [];
  /**
   * Open rows recorded less than `holdOpenMs` ago (a waiting message's row: `holdWaitingMs`), not
   * queued yet (see {@link OpenRowHolds}).
   */
  readonly #hold: OpenRowHolds;
  /**
   * Settled adapter rows waiting for their message row's next write to travel inside it (see
   * {@link #park}); one not taken within `holdOpenMs` is queued as a row of its own.
   */
  readonly #parked: OpenRowHold;
  /** Ids of the parked adapter rows, by the id of their message row. */
  readonly #parkedByMessage = new Map<string, string[]>();
  /**
   * What a parked adapter row must share with the message row it folds into (execution, route,
   * correlation id), for message rows recorded here whose row has left the writer: their queued
   * UPDATE can still carry the folded rows. Dropped once the row settles; bounded.
   */
  readonly #messageKeys = new LRUCache<string, string>({ max: MAX_MESSAGE_KEYS });

  constructor(runner: LineageSqlRunner, logger: Logger, options: LineageWriterOptions = {}) {
    this.#log = logger;
    this.#intervalMs = options.intervalMs ?? 5;
    this.#batchSize = options.batchSize ?? 2000;
    this.#maxQueued = options.maxQueued ?? 200_000;
    this.#maxHeld = options.maxHeld ?? 20_000;
    this.#laneQuietMs = options.laneQuietMs ?? LANE_QUIET_MS;
    const policy = {
      attempts: options.attempts ?? 6,
      retryDelayMs: options.retryDelayMs ?? 100,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 2000,
      attemptTimeoutMs: options.attemptTimeoutMs ?? 30_000,
    };
    const laneRunner = runner.pendingLane?.() ?? runner;
    this.#laneShared = laneRunner === runner;
    // Two commits in flight on a connection pool of their own; one when the connection is shared.
    this.#laneWidth = this.#laneShared ? 1 : LANE_WIDTH;
    this.#bulk = new BatchCommitter(runner, logger, policy, this.#counters);
    this.#lane = new BatchCommitter(laneRunner, logger, policy, this.#counters);
    const holdMs = options.holdOpenMs ?? HOLD_OPEN_MS;
    this.#hold = new OpenRowHolds(holdMs, options.holdWaitingMs ?? HOLD_WAITING_MS, (rows) => {
      for (const row of rows) this.#queueInsert(row);
      this.#schedule();
    });
    this.#parked = new OpenRowHold(holdMs, (rows) => {
      for (const row of rows) {
        this.#forgetParked(row);
        this.#queueInsert(row);
      }
      this.#schedule();
    });
  }

  record(row: LineageRow): void {
    if (!this.#admit(1)) return;
    this.#queueRecord(toPendingRow(row));
  }

  update(id: string, change: LineageUpdate): void {
    this.#queueUpdate(id, change, false);
  }

  /**
   * Commits `rows` through the pending lane; resolves once they are committed (or counted lost).
   * Does not wait for bulk writes queued before it: use {@link flush} for that.
   */
  async registerPending(rows: readonly LineageRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.#laneUsedAt = performance.now();
    // A row registered again while its previous registration is being committed goes after it.
    while (rows.some((r) => this.#laneInFlight.has(r.id))) await this.#laneTail;
    if (!this.#admit(rows.length)) return;
    for (const row of rows) {
      // Like a record, it supersedes whatever the bulk lane still holds for the id — but never a
      // change that is further along (a duplicate re-registration must not undo a completion).
      const fresh = toPendingRow(row);
      keepFurthest(
        fresh,
        this.#hold.take(row.id) ??
          this.#inserts.get(row.id) ??
          this.#updates.get(row.id) ??
          this.#laneRows.get(row.id),
      );
      this.#inserts.delete(row.id);
      this.#updates.delete(row.id);
      // Its parent row goes in the same commit: a stored row's parent is stored (see #queueInsert).
      const parents: PendingRow[] = [];
      for (let p = this.#parkedParentOf(fresh); p !== undefined; p = this.#parkedParentOf(p))
        parents.unshift(p);
      for (const parent of parents) this.#laneRows.set(parent.id, parent);
      this.#laneRows.set(row.id, fresh);
      this.#rememberMessage(fresh);
    }
    const done = new Promise<void>((resolve) =>
      this.#laneWaiters.push({ inserts: this.#laneRows.size, updates: 0, resolve }),
    );
    this.#startLane();
    return done;
  }

  /**
   * Writes the held open rows as they stand, then resolves once every write queued before the call
   * (in either lane) has been committed (or counted lost): everything recorded before it is readable.
   */
  flush(): Promise<void> {
    this.#releaseHeld();
    return this.flushQueued();
  }

  /**
   * Like {@link flush}, but leaves the held open rows in memory (count them with {@link heldOpen}):
   * what the completion gate needs, without turning every quick hop back into two writes.
   */
  flushQueued(): Promise<void> {
    const lane = this.#flushLane();
    const bulk = this.#flushBulk();
    // Writes held back behind an in-flight pending-lane commit join the bulk lane when it ends.
    if (this.#deferredCount > 0) return Promise.all([lane, bulk]).then(() => this.#flushBulk());
    return Promise.all([lane, bulk]).then(() => {});
  }

  counters(): LineageCounters {
    return { ...this.#counters, queued: this.#queued() };
  }

  /**
   * `undefined` while at most `limit` writes are queued (in flight included); otherwise resolves once
   * no more than `limit` are. Unlike {@link flush} it does not wait for the writes queued after the
   * batch in flight, so a caller queues its next writes while that batch commits.
   */
  roomFor(limit: number): Promise<void> | undefined {
    if (this.#backlog() <= limit) return undefined;
    return new Promise<void>((resolve) => this.#roomWaiters.push({ limit, resolve }));
  }

  /** Resolves the `roomFor` callers whose limit the queue is now within. */
  #releaseRoom(): void {
    if (this.#roomWaiters.length === 0) return;
    const queued = this.#backlog();
    const waiting: RoomWaiter[] = [];
    for (const waiter of this.#roomWaiters) {
      if (queued <= waiter.limit) waiter.resolve();
      else waiting.push(waiter);
    }
    this.#roomWaiters = waiting;
  }

  /**
   * Open rows of `executionId` held in memory (recorded, not yet written): the completion gate adds
   * them to the open rows it counts in the database.
   */
  heldOpen(executionId: string): number {
    return this.#hold.openOf(executionId);
  }

  /** Flushes (held open rows included), then refuses further writes. */
  async close(): Promise<void> {
    await this.flush();
    this.#closed = true;
  }

  /** Queues every held row as it stands (open), and every parked adapter row as a row of its own. */
  #releaseHeld(): void {
    if (this.#hold.size + this.#parked.size === 0) return;
    // Parked rows first: a held row's parent may be among them.
    for (const row of this.#parked.drain()) this.#inserts.set(row.id, row);
    this.#parkedByMessage.clear();
    for (const row of this.#hold.drain()) this.#inserts.set(row.id, row);
    this.#schedule();
  }

  /**
   * Writes waiting for (or in) a commit: what `roomFor` bounds. Held open rows are left out: they
   * wait for their hop, not for the database, and none of them is written while held.
   */
  #backlog(): number {
    return this.#queued() - this.#hold.size - this.#parked.size;
  }

  #queued(): number {
    return (
      this.#hold.size +
      this.#parked.size +
      this.#inserts.size +
      this.#updates.size +
      this.#inFlight.size +
      this.#laneRows.size +
      this.#laneInFlight.size +
      this.#deferredCount
    );
  }

  #defer(id: string, replay: () => void): void {
    const list = this.#deferred.get(id);
    if (list === undefined) this.#deferred.set(id, [replay]);
    else list.push(replay);
    this.#deferredCount++;
  }

  #queueRecord(row: PendingRow): void {
    const id = row.id;
    if (this.#laneInFlight.has(id)) {
      this.#defer(id, () => this.#queueRecord(row));
      return;
    }
    if (row.kind === "message") this.#rememberMessage(row);
    // Recorded again while parked: nothing of it is queued anywhere else.
    const parked = this.#unpark(id);
    if (parked !== undefined) keepFurthest(row, parked);
    const held = this.#hold.get(id);
    if (held !== undefined) {
      // Recorded again while held: the newer row replaces it (keeping a further status).
      keepFurthest(row, held);
      if (isOpenStatus(row.status)) this.#hold.replace(row);
      else this.#settleHeld(row);
      return;
    }
    const laneRow = this.#laneRows.get(id);
    if (laneRow !== undefined) {
      // Not yet sent by the pending lane: the newer row replaces it there (keeping a further status).
      keepFurthest(row, laneRow);
      this.#laneRows.set(id, row);
      return;
    }
    // A record supersedes any change queued for the same id before it, unless that change is
    // further along (same rule as the upsert's guard in lineage-sql.ts).
    const queued = this.#inserts.get(id) ?? this.#updates.get(id);
    if (
      queued === undefined &&
      this.#hold.enabled &&
      this.#hold.size < this.#maxHeld &&
      isOpenStatus(row.status) &&
      !this.#inFlight.has(id)
    ) {
      // Nothing of this row is queued or being written: keep it back until it settles or its time
      // runs out, so a quick hop costs one write instead of an insert and an update.
      this.#hold.add(row);
      return;
    }
    if (queued === undefined && !this.#inFlight.has(id) && this.#foldable(row)) {
      this.#park(row);
      return;
    }
    keepFurthest(row, queued);
    this.#updates.delete(id);
    this.#queueInsert(row);
    this.#schedule();
  }

  /**
   * Queues a row as an insert, after its parent row when that one is parked: a row is never stored
   * before its parent (a child message row's delivery can end, and commit, before the delivery that
   * published it updates its own message row, which would carry the parked parent). Batches take the
   * queue from the front, so the parent commits first or in the same batch.
   */
  #queueInsert(row: PendingRow): void {
    const parent = this.#parkedParentOf(row);
    if (parent !== undefined) this.#queueInsert(parent);
    this.#inserts.set(row.id, row);
  }

  /** The row's parent taken out of the parked rows, or undefined when it is not parked. */
  #parkedParentOf(row: PendingRow): PendingRow | undefined {
    if (row.parent_id === null || this.#parked.size === 0) return undefined;
    return this.#unpark(row.parent_id);
  }

  /**
   * A held row that settled: out of the hold, into the bulk queue as one settled insert (an adapter
   * row: parked, to travel inside its message row).
   */
  #settleHeld(row: PendingRow): void {
    this.#hold.take(row.id);
    if (this.#foldable(row)) {
      this.#park(row);
      return;
    }
    this.#queueInsert(row);
    this.#schedule();
  }

  /**
   * A settled adapter row that may travel inside its message row (whose id is the message id): the
   * hold is on, and it carries nothing a folded row leaves out (a payload).
   */
  #foldable(row: PendingRow): boolean {
    return (
      row.kind === "adapter" &&
      this.#hold.enabled &&
      !isOpenStatus(row.status) &&
      row.payload === null &&
      row.invocations === null
    );
  }

  /**
   * Keeps a settled adapter row until the next write of its message row, which carries it (see
   * {@link #attachParked}). The engine settles a message (updates its row) after every adapter row
   * of the delivery settled, and the delivery's commit (`flushQueued`) comes after that update, so
   * a parked row is queued by the time its delivery needs it durable.
   */
  #park(row: PendingRow): void {
    this.#parked.add(row);
    const ids = this.#parkedByMessage.get(row.message_id);
    if (ids === undefined) this.#parkedByMessage.set(row.message_id, [row.id]);
    else ids.push(row.id);
  }

  /** Takes a parked row back (it is written again or changed), or undefined when it is not parked. */
  #unpark(id: string): PendingRow | undefined {
    if (this.#parked.size === 0) return undefined;
    const row = this.#parked.take(id);
    if (row !== undefined) this.#forgetParked(row);
    return row;
  }

  #forgetParked(row: PendingRow): void {
    const ids = this.#parkedByMessage.get(row.message_id);
    if (ids === undefined) return;
    const at = ids.indexOf(row.id);
    if (at >= 0) ids.splice(at, 1);
    if (ids.length === 0) this.#parkedByMessage.delete(row.message_id);
  }

  /** Remembers what adapter rows folding into this message row must share with it. */
  #rememberMessage(row: PendingRow): void {
    if (!this.#hold.enabled || row.message_id !== row.id) return;
    // Beyond MAX_MESSAGE_KEYS the cache forgets the oldest in constant time (a Map's oldest key,
    // taken with `keys().next()` after many deletions, walks past every deleted slot first).
    this.#messageKeys.set(row.id, foldKey(row));
  }

  /**
   * After a write of message row `messageId` with status `status`: its parked adapter rows go inside
   * the row's queued write (held, queued insert, or queued UPDATE); when there is none to carry them
   * (the row is being written, or was written elsewhere), as rows of their own. A message row left
   * open (`pending`) by its delivery's end stays held in memory only, so the rows folded into it
   * go out on their own now: its delivery's commit must make them durable.
   */
  #attachParked(messageId: string, status: LineageStatus): void {
    const settled = !isOpenStatus(status);
    const key = this.#messageKeys.peek(messageId);
    if (settled && key !== undefined) this.#messageKeys.delete(messageId);
    const held = this.#hold.get(messageId);
    if (held !== undefined && status === "pending" && held.invocations !== null) {
      for (const row of held.invocations) this.#queueInsert(row);
      held.invocations = null;
      this.#schedule();
    }
    // A held message row is open (its settling update queued it): the rows stay parked for its
    // next write, unless the delivery ended with it open (`pending`), which needs them durable now.
    if (held !== undefined && status !== "pending") return;
    const ids = this.#parkedByMessage.get(messageId);
    if (ids === undefined) return;
    this.#parkedByMessage.delete(messageId);
    const rows: PendingRow[] = [];
    for (const id of ids) {
      const row = this.#parked.take(id);
      if (row !== undefined) rows.push(row);
    }
    if (rows.length === 0) return;
    let target: PendingRow | PendingUpdate | undefined;
    let targetKey: string | undefined;
    // Ahead of any child row queued later in the same queue (and in the same COPY when in one
    // batch): a bulk insert may carry a parent row. A pending-lane insert or an UPDATE commits apart
    // from the bulk inserts, so one carries no row a held row names as parent (that one is queued
    // on its own now, ahead of its child).
    let carriesParents = false;
    if (held === undefined) {
      const inserted = this.#inserts.get(messageId);
      if (inserted !== undefined) {
        target = inserted;
        targetKey = messageKeyOf(inserted);
        carriesParents = true;
      } else {
        const laneRow = this.#laneRows.get(messageId);
        target = laneRow ?? (key === undefined ? undefined : this.#updates.get(messageId));
        targetKey = laneRow === undefined ? key : messageKeyOf(laneRow);
      }
    }
    let alone = false;
    for (const row of rows) {
      if (
        target !== undefined &&
        targetKey !== undefined &&
        foldKey(row) === targetKey &&
        (carriesParents || !this.#hold.holdsChildOf(row.id))
      ) {
        if (target.invocations === null) target.invocations = [row];
        else target.invocations.push(row);
      } else {
        this.#queueInsert(row);
        alone = true;
      }
    }
    if (alone) this.#schedule();
  }

  #queueUpdate(id: string, change: LineageUpdate, admitted: boolean): void {
    this.#applyUpdate(id, change, admitted);
    if (this.#parkedByMessage.size > 0 || this.#messageKeys.size > 0 || change.status === "pending")
      this.#attachParked(id, change.status);
  }

  #applyUpdate(id: string, change: LineageUpdate, admitted: boolean): void {
    if (this.#laneInFlight.has(id)) {
      // The row may not be stored yet: an UPDATE now could match nothing and be lost.
      if (!admitted && !this.#admit(1)) return;
      this.#defer(id, () => this.#queueUpdate(id, change, true));
      return;
    }
    const held = this.#hold.get(id);
    if (held !== undefined) {
      applyChange(held, change);
      if (!isOpenStatus(held.status)) this.#settleHeld(held);
      else this.#hold.changed(held);
      return;
    }
    const parked = this.#parked.size === 0 ? undefined : this.#parked.get(id);
    if (parked !== undefined) {
      applyChange(parked, change);
      if (isOpenStatus(parked.status)) {
        // Open again: no longer a settled row to fold.
        this.#unpark(id);
        this.#queueInsert(parked);
        this.#schedule();
      }
      return;
    }
    // Not yet sent: fold the change into the queued row, so pending→completed costs one write.
    const queued = this.#laneRows.get(id) ?? this.#inserts.get(id) ?? this.#updates.get(id);
    if (queued !== undefined) {
      applyChange(queued, change);
      return;
    }
    if (!admitted && !this.#admit(1)) return;
    this.#updates.set(id, {
      id,
      status: change.status,
      output_keys: change.outputKeys ?? null,
      error: change.error ?? null,
      finished_at: change.finishedAt ?? null,
      attempt: change.attempt ?? null,
      invocations: null,
    });
    this.#schedule();
  }

  #admit(count: number): boolean {
    if (this.#closed) {
      throw new FactflowError(
        "lineage_error",
        "[factflow/lineage] the lineage writer is closed; open a new database.",
      );
    }
    const queued = this.#queued();
    if (queued + count <= this.#maxQueued) {
      this.#overflowing = false;
      return true;
    }
    this.#counters.lost += count;
    if (!this.#overflowing) {
      this.#overflowing = true;
      this.#log.error("lineage queue full: dropping lineage writes until it drains (counted in lost)", {
        queued,
        maxQueued: this.#maxQueued,
        lost: this.#counters.lost,
      });
    }
    return false;
  }

  // ---- bulk lane ----

  #flushBulk(): Promise<void> {
    if (this.#inserts.size + this.#updates.size === 0) return this.#bulkTail;
    // Batches take from the front of the queue, so what is queued now is done once this many
    // rows and updates have been taken and their batch committed (or counted lost).
    const done = new Promise<void>((resolve) =>
      this.#waiters.push({ inserts: this.#inserts.size, updates: this.#updates.size, resolve }),
    );
    this.#startNow();
    return done;
  }

  #schedule(): void {
    if (this.#draining !== undefined || this.#timer !== undefined) return;
    if (this.#inserts.size + this.#updates.size >= this.#batchSize) {
      this.#startNow();
      return;
    }
    this.#timer = setTimeout(() => this.#startNow(), this.#intervalMs);
  }

  #startNow(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#draining !== undefined) return;
    this.#draining = this.#drain().finally(() => {
      this.#draining = undefined;
      // Writes that arrived during the last commit start their own interval.
      if (this.#inserts.size + this.#updates.size > 0) this.#schedule();
    });
  }

  async #drain(): Promise<void> {
    // While commits are in flight new writes pile up; they go out together as soon as one ends.
    while (this.#inserts.size + this.#updates.size > 0) {
      // One turn of the event loop before taking the batch lets callers that were waiting on the
      // previous commit (PGlite runs on this thread) queue their updates, which then merge.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // On a shared connection a pending-lane commit goes first: someone is waiting to publish.
      while (this.#laneShared && this.#laneFlights.size > 0) await this.#laneTail;
      if (this.#bulkFlights.size >= this.#bulkWidthNow()) {
        await Promise.race(this.#bulkFlights);
        continue;
      }
      // From the front of each queue, up to the first write of a row in flight: a batch never
      // overtakes an earlier write of the same row, and a flush's count stays a prefix.
      const inserts = takeFront(this.#inserts, this.#batchSize, this.#inFlight);
      const updates = takeFront(this.#updates, this.#batchSize, this.#inFlight);
      if (inserts.length + updates.length === 0) {
        // Both queues start with a row in flight: wait for its batch.
        if (this.#bulkFlights.size > 0) await Promise.race(this.#bulkFlights);
        continue;
      }
      const served = serve(this.#waiters, inserts.length, updates.length);
      for (const r of inserts) this.#inFlight.add(r.id);
      for (const u of updates) this.#inFlight.add(u.id);
      const flight = this.#commitBulk(inserts, updates);
      this.#bulkFlights.add(flight);
      void flight.then(() => this.#bulkFlights.delete(flight));
      // Batches may commit out of order; a waiter counted writes up to this batch, so it also
      // needs every batch taken before it.
      this.#bulkTail = Promise.all([this.#bulkTail, flight]).then(() => {});
      if (served.length > 0)
        void this.#bulkTail.then(() => {
          for (const waiter of served) waiter.resolve();
        });
    }
    // The queue is empty, so everything queued before any remaining flush is taken (a waiter can
    // over-count when a record replaced a queued update after the flush call).
    const rest = this.#waiters;
    this.#waiters = [];
    if (rest.length > 0)
      void this.#bulkTail.then(() => {
        for (const waiter of rest) waiter.resolve();
      });
  }

  /**
   * Bulk batches allowed in flight now. With connections of their own for the pending lane, two. On a
   * shared connection (PGlite, which runs one statement at a time) a second batch waits in the
   * database's queue behind the one running, so the database starts it the moment the first ends
   * instead of idling while this thread prepares it (a fifth to a third more messages a second in
   * the peer relay). A pending-lane commit would then wait behind both, so while callers use the lane
   * (strict lineage registers every hop) it stays one: two only after `laneQuietMs` without. The
   * first registration after such a quiet spell may still find two batches queued ahead of it.
   */
  #bulkWidthNow(): number {
    if (!this.#laneShared) return BULK_WIDTH;
    return performance.now() - this.#laneUsedAt < this.#laneQuietMs ? 1 : BULK_WIDTH;
  }

  /** Commits one bulk batch (never rejects), then frees its rows for later batches. */
  async #commitBulk(inserts: PendingRow[], updates: PendingUpdate[]): Promise<void> {
    try {
      await this.#bulk.write(inserts, updates);
    } catch (error) {
      // `write` counts its own failures; this only keeps a bug there from wedging the writer.
      this.#log.error("lineage batch failed unexpectedly", { error: String(error) });
    } finally {
      for (const r of inserts) this.#inFlight.delete(r.id);
      for (const u of updates) this.#inFlight.delete(u.id);
      this.#releaseRoom();
    }
  }

  // ---- pending lane ----

  #flushLane(): Promise<void> {
    if (this.#laneRows.size === 0) return this.#laneTail;
    const done = new Promise<void>((resolve) =>
      this.#laneWaiters.push({ inserts: this.#laneRows.size, updates: 0, resolve }),
    );
    this.#startLane();
    return done;
  }

  #startLane(): void {
    if (this.#laneDraining !== undefined) return;
    this.#laneDraining = this.#drainLane().finally(() => {
      this.#laneDraining = undefined;
      if (this.#laneRows.size > 0) this.#startLane();
    });
  }

  async #drainLane(): Promise<void> {
    // No interval: the caller is waiting. Rows registered while the commits run go out together next.
    while (this.#laneRows.size > 0) {
      // Registrations made in the same turn (concurrent handlers) share the commit.
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.#laneFlights.size >= this.#laneWidth) {
        await Promise.race(this.#laneFlights);
        continue;
      }
      const rows = take(this.#laneRows, this.#batchSize);
      if (rows.length === 0) continue;
      const served = serve(this.#laneWaiters, rows.length, 0);
      for (const r of rows) this.#laneInFlight.add(r.id);
      const flight = this.#commitLane(rows);
      this.#laneFlights.add(flight);
      void flight.then(() => this.#laneFlights.delete(flight));
      // Batches may commit out of order; a waiter counted rows up to this batch, so it also needs
      // every batch taken before it.
      this.#laneTail = Promise.all([this.#laneTail, flight]).then(() => {});
      void this.#laneTail.then(() => {
        for (const waiter of served) waiter.resolve();
      });
    }
    const rest = this.#laneWaiters;
    this.#laneWaiters = [];
    void this.#laneTail.then(() => {
      for (const waiter of rest) waiter.resolve();
    });
  }

  /** Commits one pending-lane batch (never rejects), then releases the bulk writes held for its rows. */
  async #commitLane(rows: PendingRow[]): Promise<void> {
    try {
      // A re-registered row whose bulk write is still in flight: that write must land first.
      while (rows.some((r) => this.#inFlight.has(r.id))) await Promise.race(this.#bulkFlights);
      await this.#lane.write(rows, []);
    } finally {
      for (const r of rows) {
        this.#laneInFlight.delete(r.id);
        const replays = this.#deferred.get(r.id);
        if (replays === undefined) continue;
        this.#deferred.delete(r.id);
        this.#deferredCount -= replays.length;
        for (const replay of replays) replay();
      }
      this.#releaseRoom();
    }
  }
}

/** Counts a taken batch against a lane's waiters; returns (and removes) those it completes. */
function serve(waiters: Waiter[], inserts: number, updates: number): Waiter[] {
  // One pass, the waiters still waiting moved down in place: thousands of deliveries wait on a busy
  // route's commits, and removing each served one on its own (`splice`) cost time quadratic in them.
  const served: Waiter[] = [];
  let kept = 0;
  for (const waiter of waiters) {
    waiter.inserts -= inserts;
    waiter.updates -= updates;
    if (waiter.inserts > 0 || waiter.updates > 0) waiters[kept++] = waiter;
    else served.push(waiter);
  }
  waiters.length = kept;
  return served;
}

function applyChange(target: PendingRow | PendingUpdate, change: LineageUpdate): void {
  target.status = change.status;
  if (change.outputKeys !== undefined) target.output_keys = change.outputKeys;
  if (change.error !== undefined) target.error = change.error;
  if (change.finishedAt !== undefined) target.finished_at = change.finishedAt;
  if (change.attempt !== undefined) target.attempt = change.attempt;
}

const STATUS_RANK: Record<LineageStatus, number> = {
  pending: 0,
  initiated: 1,
  processing: 2,
  completed: 3,
  failed: 3,
  abandoned: 3,
  skipped: 3,
};

/**
 * In-memory twin of the upsert guard: when a queued write for the same id is further along by
 * (attempt, status rank) than `fresh`, its outcome is carried onto `fresh`, so replacing the queued
 * write can never move the row backwards (e.g. a duplicate `pending` over a queued `completed`).
 */
function keepFurthest(fresh: PendingRow, queued: PendingRow | PendingUpdate | undefined): void {
  if (queued === undefined) return;
  // Adapter rows folded into the queued write travel on with the write that replaces it.
  if (queued.invocations !== null && queued !== fresh) {
    const ids = new Set(fresh.invocations?.map((r) => r.id));
    const carried = queued.invocations.filter((r) => !ids.has(r.id));
    fresh.invocations = fresh.invocations === null ? carried : [...fresh.invocations, ...carried];
  }
  if (fresh.parent_message_id === null && "parent_message_id" in queued)
    fresh.parent_message_id = queued.parent_message_id;
  const queuedAttempt = queued.attempt ?? fresh.attempt;
  const ahead =
    queuedAttempt > fresh.attempt ||
    (queuedAttempt === fresh.attempt && STATUS_RANK[queued.status] > STATUS_RANK[fresh.status]);
  if (!ahead) return;
  fresh.status = queued.status;
  fresh.attempt = queuedAttempt;
  if (queued.output_keys !== null) fresh.output_keys = queued.output_keys;
  if (queued.error !== null) fresh.error = queued.error;
  if (queued.finished_at !== null) fresh.finished_at = queued.finished_at;
}

/** Pending-lane commits in flight at once on a dedicated pool. */
const LANE_WIDTH = 2;
/** Bulk commits in flight at once (see `#bulkWidthNow`). */
const BULK_WIDTH = 2;
/** Default `laneQuietMs`. */
const LANE_QUIET_MS = 250;
/** Default `holdOpenMs` (see the option). */
const HOLD_OPEN_MS = 250;
/** Default `holdWaitingMs` (see the option). */
const HOLD_WAITING_MS = 5000;
/** Message rows whose fold key the writer remembers after they left it (see `#messageKeys`). */
const MAX_MESSAGE_KEYS = 100_000;

/** What an adapter row shares with the message row it folds into. */
function foldKey(row: PendingRow): string {
  return `${row.execution_id}\u0000${row.route}\u0000${row.correlation_id}\u0000${row.message_id}`;
}

/** The fold key of a message row, or undefined for a row adapter rows cannot fold into. */
function messageKeyOf(row: PendingRow): string | undefined {
  return row.kind === "message" && row.message_id === row.id ? foldKey(row) : undefined;
}

/** Up to `max` values from the front of `map`, stopping at the first key in `busy`. */
function takeFront<V>(map: Map<string, V>, max: number, busy: ReadonlySet<string>): V[] {
  const out: V[] = [];
  for (const [key, value] of map) {
    if (out.length >= max || busy.has(key)) break;
    out.push(value);
    map.delete(key);
  }
  return out;
}

function take<V>(map: Map<string, V>, max: number): V[] {
  const out: V[] = [];
  for (const [key, value] of map) {
    if (out.length >= max) break;
    out.push(value);
    map.delete(key);
  }
  return out;
}
