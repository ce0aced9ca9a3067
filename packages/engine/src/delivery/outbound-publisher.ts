import {
  Headers,
  type JsonValue,
  type LineageProtocol,
  type LineageRow,
  type MessageEnvelope,
  type OutboundMessage,
  PipelineError,
} from "@factflow/protocols";
import { isReseeded, RESEED_HEADER } from "../execution/reseed.js";
import { childMessageId, nowIso } from "../ids.js";
import { errorInfoOf, messageRow } from "../lineage/lineage-rows.js";
import { QUEUED_ROW_HEADER, queuedRowHeader } from "../lineage/queued-row.js";
import type { ExecutionRuntime } from "../runtime.js";
import type { PendingEmit } from "./adapter-chain.js";
import type { Watermark } from "./semaphore.js";
import type { ChainTrace } from "./tracing.js";

/** Fan-out targets prepared between two turns of the event loop. */
const YIELD_EVERY = 512;

/** Rows registered per call for a large fan-out (see publishAll). */
const REGISTER_SLICE = 2000;

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** What one settled chain sends on. */
export interface OutboundBatch {
  readonly route: string;
  readonly outbound: readonly string[];
  /** The delivery being handled (its correlation id is inherited). */
  readonly envelope: MessageEnvelope;
  /**
   * The broker handed this delivery out before (to this process or another one). Its children may
   * then have been published and settled already, possibly by another server of a cluster, so they
   * are flagged like re-seeded messages and judged by their lineage rows on arrival.
   */
  readonly redelivered?: boolean;
  /**
   * The delivery is the message's first run anywhere: attempt 1, neither redelivered nor re-seeded
   * (nor the original of a re-seeded copy), no batch members. Its children cannot exist yet, so
   * their ids are not looked up in the delivery ledger. Anything else, or leaving it out, looks them up.
   */
  readonly firstRun?: boolean;
  /** The chain's final data: published to every outbound queue unless null. */
  readonly data: JsonValue | null;
  /** The adapter row the final data came from. */
  readonly lastRowId: string | undefined;
  /** Fan-out messages collected along the chain. */
  readonly emitted: readonly PendingEmit[];
  /**
   * The messages a stateful adapter emitted together with this one (its batch), when there are any.
   * Output ids then derive from every member: after a restart the same message may complete a batch
   * with other members, and that batch must not take the ids of the one it completed before.
   */
  readonly batchMembers?: readonly string[] | undefined;
  readonly watermark: Watermark;
  readonly maxFanoutPending: number;
  /** The delivery's spans, when the engine traces: each message carries its producer's context. */
  readonly trace?: ChainTrace | undefined;
}

interface Target {
  queue: string;
  body: JsonValue;
  parentId: string | undefined;
  headers?: Record<string, string>;
  priority?: number;
}

/**
 * Publishes a chain's outputs and resolves once every publish is confirmed (the caller acks only
 * then). Each message gets a `message` lineage row first: fan-out children are registered durably
 * before any of them is published, so a completion check can never run between the parent's ack
 * and its children's publish. Resolves to how many messages were published (a plain number when
 * there was nothing to publish); rejects with (or throws) the first failure.
 */
export function publishOutputs(runtime: ExecutionRuntime, batch: OutboundBatch): Promise<number> | number {
  const queue = batch.outbound[0];
  if (
    queue !== undefined &&
    batch.outbound.length === 1 &&
    batch.data !== null &&
    batch.emitted.length === 0 &&
    !runtime.strictLineage
  )
    return publishOne(runtime, batch, queue, batch.data);
  return publishAll(runtime, batch);
}

/**
 * The common relay: the chain's data to the route's one outbound queue, nothing emitted. The same
 * steps as {@link publishAll} for one target, without its lists and worker pool, and without an
 * async function: one promise reaction between the broker's confirm and the caller.
 */
function publishOne(
  runtime: ExecutionRuntime,
  batch: OutboundBatch,
  queue: string,
  body: JsonValue,
): Promise<number> | number {
  const target: Target = { queue, body, parentId: batch.lastRowId };
  const row = outputRow(runtime, batch, parentKeyOf(batch), target, 0);
  if (row === undefined) return 0;
  const watermark = batch.watermark;
  watermark.add(1);
  let sent: Promise<unknown>;
  try {
    runtime.lineage.record(row);
    const room = lineageRoom(runtime.lineage, runtime.maxLineageBacklog);
    const reseeded = batch.redelivered === true || isReseeded(batch.envelope);
    sent =
      room === undefined
        ? sendTarget(runtime, batch, target, row.id, reseeded, true)
        : room.then(() => sendTarget(runtime, batch, target, row.id, reseeded, true));
  } catch (error) {
    watermark.done(1);
    throw error;
  }
  return sent.then(
    () => {
      watermark.done(1);
      return 1;
    },
    (error: unknown) => {
      watermark.done(1);
      return publishFailed(runtime, row.id, error);
    },
  );
}

/**
 * The `message` row of the `index`-th output, or `undefined` when that child needs no publish. Same
 * parent (or batch members), route, queue and position → same id: a re-run of this delivery
 * republishes the very messages (and lineage rows) of its first run, never a second generation. A
 * child already handled here (or being handled) needs no second copy: republishing it would only
 * make a duplicate, and re-registering its row could queue `pending` over its settlement.
 */
function outputRow(
  runtime: ExecutionRuntime,
  batch: OutboundBatch,
  parentKey: string,
  target: Target,
  index: number,
): LineageRow | undefined {
  const messageId = childMessageId(parentKey, batch.route, target.queue, index);
  if (batch.firstRun !== true) {
    const ledger = runtime.deliveries;
    if (ledger.isSettled(messageId) || ledger.isRunning(messageId)) return undefined;
  }
  return messageRow({
    executionId: runtime.executionId,
    route: runtime.routeForQueue(target.queue) ?? target.queue,
    messageId,
    correlationId: batch.envelope.correlationId,
    payload: target.body,
    parentId: target.parentId,
    // The adapter row `parentId` names belongs to the delivery being handled: the tree walks up
    // through this, since that row may be stored inside its message's row.
    parentMessageId: target.parentId === undefined ? undefined : batch.envelope.id,
  });
}

/** Same parent (or the same batch members) → same key → the same child ids on a re-run. */
function parentKeyOf(batch: OutboundBatch): string {
  return batch.batchMembers === undefined || batch.batchMembers.length === 0
    ? batch.envelope.id
    : [batch.envelope.id, ...batch.batchMembers].sort().join("+");
}

/**
 * Every target of a chain: fan-out, several outbound queues, or strict lineage. Every child's row is
 * recorded (or registered) before the first publish; the targets are made twice, once for the rows
 * and once for the publishes, and a row is let go once it is recorded: of a large fan-out only its
 * child ids stay alive the whole time, not every child's row and target at once.
 */
async function publishAll(runtime: ExecutionRuntime, batch: OutboundBatch): Promise<number> {
  await checkEmittedQueues(batch);
  const reseeded = batch.redelivered === true || isReseeded(batch.envelope);
  // Rows only queued in the writer (not registered durably) travel with the run that queued them.
  // Without strict lineage the publisher is always the consumer (one process), so fan-out children
  // are queued too: this process's gate counts them (queued or held by the writer) before any is
  // published, and a run that dies before they are stored leaves the header that restores them.
  const queuedRows = !runtime.strictLineage;
  const ids = await recordRows(runtime, batch, queuedRows);
  const count = ids.reduce((n, id) => (id === undefined ? n : n + 1), 0);
  if (count === 0) return 0;
  batch.watermark.add(count);
  let remaining = count;
  let published = 0;
  let failure: unknown;
  // The targets again, in the same order, each with the id of its row (skipping the children that
  // need no publish).
  const targets = targetsOf(batch);
  let index = 0;
  const take = (): { target: Target; id: string } | undefined => {
    for (let next = targets.next(); next.done !== true; next = targets.next()) {
      const id = ids[index++];
      if (id !== undefined) return { target: next.value, id };
    }
    return undefined;
  };
  try {
    // Publishes to an in-process broker complete as microtasks: without a pause every
    // YIELD_EVERY messages, a large fan-out would run to its end before any timer or I/O.
    let pause: Promise<void> | undefined;
    let started = 0;
    const worker = async () => {
      for (;;) {
        if (pause !== undefined) await pause;
        const item = take();
        if (item === undefined) break;
        if (started++ % YIELD_EVERY === YIELD_EVERY - 1) {
          const turn = yieldToEventLoop();
          pause = turn;
          void turn.then(() => {
            if (pause === turn) pause = undefined;
          });
        }
        try {
          await sendTarget(runtime, batch, item.target, item.id, reseeded, queuedRows);
          published++;
        } catch (error) {
          failure ??= closeUnpublished(runtime, item.id, error);
        } finally {
          remaining--;
          batch.watermark.done(1);
        }
      }
    };
    // One message (the common relay) needs no pool. At most `max_fanout_pending` publishes in
    // flight, and 256: enough for a network broker to pipeline its confirms (a narrower window
    // leaves a large fan-out waiting on round trips).
    const width = Math.min(count, batch.maxFanoutPending, 256);
    if (width === 1) await worker();
    else await Promise.all(Array.from({ length: width }, worker));
  } catch (error) {
    batch.watermark.done(remaining); // what was never attempted
    throw error;
  }
  if (failure !== undefined) throw failure;
  return published;
}

/**
 * Records (or, with strict lineage, registers durably) the `message` row of every target, a slice
 * of {@link REGISTER_SLICE} at a time, before anything is published. Returns each target's row id in
 * output order, `undefined` for a child that needs no publish.
 */
async function recordRows(
  runtime: ExecutionRuntime,
  batch: OutboundBatch,
  queuedRows: boolean,
): Promise<(string | undefined)[]> {
  const parentKey = parentKeyOf(batch);
  const ids: (string | undefined)[] = [];
  let slice: LineageRow[] = [];
  const flushSlice = async (last: boolean) => {
    if (slice.length === 0) return;
    const rows = slice;
    slice = [];
    if (!queuedRows) {
      // Durable before any publish, so no process's completion gate can miss a child. A large
      // fan-out goes in slices with a turn of the event loop between them: writing thousands of
      // rows at once would hold the thread (timers, other deliveries) for as long.
      if (ids.length > rows.length) await yieldToEventLoop();
      await runtime.lineage.registerPending(rows);
      return;
    }
    // Queued ahead of every later change of the parent's rows, so this process's gate sees them;
    // the backlog is bounded to keep completion prompt. A large fan-out is recorded in slices,
    // each after the writer has room: recorded at once, hundreds of thousands of rows would
    // outgrow the writer's queue, which then drops writes.
    for (const row of rows) runtime.lineage.record(row);
    const room = lineageRoom(runtime.lineage, runtime.maxLineageBacklog);
    if (room !== undefined) await room;
    // With room to spare, the next slice still waits for a turn of the event loop: recording
    // every slice up to the backlog's limit at once held the thread for 80 ms and more.
    else if (!last) await yieldToEventLoop();
  };
  for (const target of targetsOf(batch)) {
    // A large fan-out is prepared in slices, so timers and other deliveries still run meanwhile.
    if (ids.length % YIELD_EVERY === YIELD_EVERY - 1) await yieldToEventLoop();
    const row = outputRow(runtime, batch, parentKey, target, ids.length);
    ids.push(row?.id);
    if (row === undefined) continue;
    slice.push(row);
    if (slice.length === REGISTER_SLICE) await flushSlice(false);
  }
  await flushSlice(true);
  return ids;
}

/** Refuses a chain that emitted to a queue its route does not publish to, before anything is sent. */
async function checkEmittedQueues(batch: OutboundBatch): Promise<void> {
  const { outbound, emitted } = batch;
  for (let e = 0; e < emitted.length; e++) {
    if (e % (YIELD_EVERY * 8) === YIELD_EVERY * 8 - 1) await yieldToEventLoop();
    const queue = (emitted[e] as PendingEmit).message.queue;
    if (queue !== undefined && !outbound.includes(queue)) {
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] route "${batch.route}" emitted a message to "${queue}", which is not one of its outbound queues (${outbound.join(", ") || "none"})`,
      );
    }
  }
}

/** The chain's targets in output order: its data to every outbound queue, then each emitted message. */
function* targetsOf(batch: OutboundBatch): Generator<Target> {
  const { outbound } = batch;
  if (batch.data !== null)
    for (const queue of outbound) yield { queue, body: batch.data, parentId: batch.lastRowId };
  for (const { message, parentRowId } of batch.emitted) {
    for (const queue of message.queue === undefined ? outbound : [message.queue]) {
      yield {
        queue,
        body: message.body,
        parentId: parentRowId,
        ...(message.headers ? { headers: message.headers } : {}),
        ...(message.priority === undefined ? {} : { priority: message.priority }),
      };
    }
  }
}

/**
 * The broker publish of one target under its row's id (a synchronous throw rejects). `queuedRow`:
 * the row was only queued in this process's writer, not registered durably (see lineage/queued-row.ts).
 */
function sendTarget(
  runtime: ExecutionRuntime,
  batch: OutboundBatch,
  target: Target,
  id: string,
  reseeded: boolean,
  queuedRow: boolean,
): Promise<unknown> {
  // Object.assign rather than a spread, which is slow once its call site has seen several shapes.
  const headers: Record<string, string> =
    target.headers === undefined ? {} : Object.assign({}, target.headers);
  // Children of a re-seeded or redelivered message may have run already, in a process that died
  // or in another server of the cluster.
  if (reseeded) headers[RESEED_HEADER] = "1";
  if (queuedRow) headers[QUEUED_ROW_HEADER] = queuedRowHeader(runtime, batch.envelope.id);
  if (target.parentId !== undefined) headers[Headers.lineageParent] = target.parentId;
  // The execution's id set here spares the execution-scoped queue a copy of the message.
  const message: OutboundMessage = {
    id,
    body: target.body,
    correlationId: batch.envelope.correlationId,
    executionId: runtime.executionId,
    headers,
  };
  if (target.priority !== undefined) message.priority = target.priority;
  batch.trace?.stamp(message, target.parentId);
  try {
    // A native promise whatever the provider returned (resolving a native one allocates nothing).
    return Promise.resolve(runtime.queue.publish(queueDestination(target.queue), message));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** `/queue/<name>` of the queues published to, made once each (a pipeline has few). */
const destinations = new Map<string, string>();

function queueDestination(queue: string): string {
  let destination = destinations.get(queue);
  if (destination === undefined) {
    destination = `/queue/${queue}`;
    // Bounded: executions come and go, and queue names with them.
    if (destinations.size >= 1024) destinations.clear();
    destinations.set(queue, destination);
  }
  return destination;
}

/**
 * Closes the row of a message whose publish failed (never published, it must not keep the execution
 * open). Returns the error to report: the publish's, or the lineage's when the row could not be closed.
 */
function closeUnpublished(runtime: ExecutionRuntime, id: string, error: unknown): unknown {
  try {
    runtime.lineage.update(id, { status: "failed", error: errorInfoOf(error), finishedAt: nowIso() });
  } catch (closing) {
    return closing;
  }
  return error;
}

/** {@link closeUnpublished}, then throws what it reports. */
function publishFailed(runtime: ExecutionRuntime, id: string, error: unknown): never {
  throw closeUnpublished(runtime, id, error);
}

/**
 * `undefined` while the lineage backlog is within `limit`; otherwise what to wait for: room (the
 * batch being committed to land, so the next writes queue while it commits), or a full flush from a
 * store without `roomFor`.
 */
function lineageRoom(lineage: LineageProtocol, limit: number): Promise<void> | undefined {
  if (lineage.roomFor !== undefined) return lineage.roomFor(limit);
  return lineage.counters().queued > limit ? lineage.flush() : undefined;
}
