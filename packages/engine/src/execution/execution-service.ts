import { setImmediate as nextTurn, setTimeout as sleep } from "node:timers/promises";
import type {
  ExecutionRecord,
  ExecutionStatus,
  ExecutionStoreProtocol,
  JsonValue,
  LineageProtocol,
  LineageRow,
  Logger,
  PipelineConfig,
} from "@factflow/protocols";
import { isFactflowError, PipelineError } from "@factflow/protocols";
import { ExecutionNotFoundError } from "../errors.js";
import { uuidv7 } from "../ids.js";
import { abandonAdapterRows, invocationsOfSettledMessages, openRowsOf } from "../lineage/dead-invocations.js";
import type { StallDiagnosis } from "../stall/stall-diagnosis.js";
import {
  type ExecutionEvent,
  ExecutionEventHub,
  type ExecutionEventListener,
  TERMINAL_EVENT_TYPES,
} from "./execution-events.js";
import type { ExecutionProgress } from "./execution-progress.js";
import type { OrchestratorManager, StartSlot } from "./orchestrator-manager.js";
import type { ExecutionSeed } from "./pipeline-orchestrator.js";
import { openMessageRows } from "./reseed.js";

export interface CreateExecutionRequest {
  /** A config returned by `loadPipelineConfig`; it is frozen into the execution's snapshot. */
  readonly config: PipelineConfig;
  /** @default config.name */
  readonly configName?: string;
  readonly configVersion?: number | null;
  /** Body of the init message; default `config.init.message`. */
  readonly input?: JsonValue | null;
}

export interface ReplayRequest {
  /** The route the segment starts at; resolved from the parent's snapshot. */
  readonly fromRoute: string;
  /** Only these recorded inputs of `fromRoute` (message ids); default all. */
  readonly messageIds?: readonly string[];
}

/** An execution input past this many characters of JSON is stored in a turn of the event loop of its own. */
const LARGE_INPUT_CHARS = 1024 * 1024;

/**
 * Executions as the API sees them: create (freeze the snapshot, start), resume, cancel, complete,
 * fail, replay, and a per-execution event stream with monotonically increasing ids.
 */
export class ExecutionService {
  readonly hub: ExecutionEventHub;
  readonly #manager: OrchestratorManager;
  readonly #executions: ExecutionStoreProtocol;
  readonly #lineage: LineageProtocol;
  readonly #logger: Logger;
  /** Recorded as the owner of the executions created here (see `EngineOptions.nodeId`). */
  readonly #owner: { ownerNode?: string };
  /** Executions this process is creating, replaying or resuming right now: never joined meanwhile. */
  readonly #startingHere = new Set<string>();

  constructor(options: {
    manager: OrchestratorManager;
    executions: ExecutionStoreProtocol;
    lineage: LineageProtocol;
    logger: Logger;
    hub?: ExecutionEventHub;
    nodeId?: string;
  }) {
    this.#manager = options.manager;
    this.#executions = options.executions;
    this.#lineage = options.lineage;
    this.#logger = options.logger;
    this.#owner = options.nodeId === undefined ? {} : { ownerNode: options.nodeId };
    this.hub = options.hub ?? new ExecutionEventHub();
  }

  /** Freezes the config into a new execution row (status running, UUIDv7 id) and starts it. */
  async create(request: CreateExecutionRequest): Promise<ExecutionRecord> {
    const inputText = await this.#manager.checkInput(request.input);
    // Storing a large input holds the thread too (the row's statement and its hand-over to the
    // database): in a turn of its own, after the check's.
    if (inputText !== undefined && inputText.length > LARGE_INPUT_CHARS) await nextTurn();
    // The slot is taken before the row is written: a start refused at the cap leaves no row.
    const slot = this.#manager.reserve();
    const id = uuidv7();
    this.#startingHere.add(id);
    try {
      const record = await this.#executions.createExecution({
        id,
        configName: request.configName ?? request.config.name,
        configVersion: request.configVersion ?? request.config.version ?? null,
        configSnapshot: request.config,
        input: request.input ?? null,
        ...(inputText === undefined ? {} : { inputText }),
        ...this.#owner,
      });
      const seed: ExecutionSeed = {
        kind: "init",
        ...(request.input == null ? {} : { input: request.input }),
      };
      await this.#start(record, seed, slot);
      return record;
    } finally {
      slot.release();
      this.#startingHere.delete(id);
    }
  }

  /**
   * Re-runs a segment of a finished execution as a new execution linked to it: routes come from
   * the parent's snapshot only, and `fromRoute` is fed the inputs lineage recorded for it.
   */
  async replay(parentId: string, request: ReplayRequest): Promise<ExecutionRecord> {
    const parent = await this.#executions.getExecution(parentId);
    if (parent === undefined) throw new ExecutionNotFoundError(parentId);
    const snapshot = parent.configSnapshot;
    if (snapshot.routes[request.fromRoute] === undefined) {
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] route "${request.fromRoute}" is not in the snapshot of execution ${parentId}. Routes: ${Object.keys(snapshot.routes).join(", ")}`,
      );
    }
    if (parent.status === "running") {
      // Its inputs are still arriving: a replay now would silently take whatever exists so far.
      throw new PipelineError(
        "execution_not_running",
        `[factflow/engine] execution ${parentId} is still running; replay it once it has ended (completed, failed or cancelled), or cancel it first`,
      );
    }
    const inputs = await this.#lineage.routeInputs(parentId, request.fromRoute, request.messageIds);
    if (request.messageIds !== undefined) {
      const found = new Set(inputs.map((input) => input.messageId));
      const unknown = [...new Set(request.messageIds)].filter((id) => !found.has(id));
      if (unknown.length > 0) {
        const shown =
          unknown.slice(0, 10).join(", ") + (unknown.length > 10 ? ` and ${unknown.length - 10} more` : "");
        throw new PipelineError(
          "invalid_argument",
          `[factflow/engine] route "${request.fromRoute}" of execution ${parentId} recorded no input with message id ${shown}; list its inputs with GET /api/v1/executions/${parentId}/lineage?route=${request.fromRoute}&kind=message`,
        );
      }
    }
    if (inputs.length === 0) {
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] execution ${parentId} recorded no inputs for route "${request.fromRoute}"${request.messageIds ? " with those message ids" : ""}; nothing to replay`,
      );
    }
    const slot = this.#manager.reserve();
    const id = uuidv7();
    this.#startingHere.add(id);
    try {
      const record = await this.#executions.createExecution({
        id,
        configName: parent.configName,
        configVersion: parent.configVersion,
        configSnapshot: snapshot,
        input: null,
        parentExecutionId: parentId,
        replayFromRoute: request.fromRoute,
        ...this.#owner,
      });
      await this.#start(record, { kind: "inputs", route: request.fromRoute, inputs }, slot);
      return record;
    } finally {
      slot.release();
      this.#startingHere.delete(id);
    }
  }

  /**
   * Continues a `running` execution after a restart. Adapter rows the previous process left open
   * (it died mid-invocation) are closed as abandoned first. Then, once every route is subscribed,
   * each still-open message row is re-published under its own id, marked re-seeded: the previous
   * process may have acknowledged a message and died before its `completed` update was committed,
   * and the broker will not hand that one out again. Where the broker still holds the original
   * too, whichever copy comes second finds the message settled and is acknowledged unrun.
   */
  async resume(executionId: string): Promise<ExecutionRecord> {
    const record = await this.get(executionId);
    if (record.status !== "running")
      throw new ExecutionNotFoundError(executionId, `is ${record.status}, not running`);
    if (this.#manager.get(executionId) !== undefined || this.#startingHere.has(executionId)) return record;
    // Taken before the stale rows are closed: a resume refused at the cap changes nothing, and
    // the execution stays `running`, to be resumed once a slot is free.
    const slot = this.#manager.reserve();
    this.#startingHere.add(executionId);
    try {
      await this.#resumeHere(record, slot);
    } finally {
      slot.release();
      this.#startingHere.delete(executionId);
    }
    return record;
  }

  async #resumeHere(record: ExecutionRecord, slot: StartSlot): Promise<void> {
    const executionId = record.id;
    await this.#abandonOpenAdapterRows(executionId);
    const { messages, missing } = await openMessageRows(this.#lineage, executionId);
    if (missing.length > 0)
      this.#logger.warn("open message rows without a recorded payload cannot be re-published", {
        executionId,
        messageIds: missing.slice(0, 20),
        count: missing.length,
      });
    if (messages.length > 0)
      this.#logger.info(`re-publishing ${messages.length} open messages of a resumed execution`, {
        executionId,
      });
    await this.#start(record, messages.length === 0 ? { kind: "none" } : { kind: "reseed", messages }, slot);
  }

  /**
   * Cluster mode: consumes the queues of a `running` execution another server started, as one more
   * competing consumer. Publishes nothing, and a failed join leaves the execution running for the
   * others. False when it already runs here or is no longer running.
   */
  async join(executionId: string): Promise<boolean> {
    const here = () => this.#manager.get(executionId) !== undefined || this.#startingHere.has(executionId);
    if (here()) return false;
    const record = await this.#executions.getExecution(executionId);
    if (record === undefined || record.status !== "running" || here()) return false;
    const emit = (type: Parameters<ExecutionEventHub["emit"]>[1], data: Record<string, JsonValue>) =>
      this.hub.emit(record.id, type, data);
    if (!this.hub.has(record.id)) emit("started", { configName: record.configName, joined: true });
    await this.#manager.start({
      executionId: record.id,
      record,
      config: record.configSnapshot,
      seed: { kind: "none" },
      emit,
      participant: true,
    });
    return true;
  }

  /**
   * Cluster mode: the row of an execution this process runs says it ended elsewhere (completed,
   * cancelled or failed by another server). Stops it here; the event reports the row's status.
   */
  async endedElsewhere(executionId: string): Promise<void> {
    const orchestrator = this.#manager.get(executionId);
    // The row decides: finishing it again is refused, and the orchestrator reports what it says.
    if (orchestrator !== undefined) await orchestrator.cancel("ended by another server");
  }

  /**
   * Cluster takeover: closes the adapter rows of invocations that died with another server. Only
   * call it when the broker holds nothing for the execution (no live invocation anywhere).
   */
  closeDeadInvocations(executionId: string): Promise<void> {
    return this.#abandonOpenAdapterRows(executionId);
  }

  /**
   * Cluster takeover, from the moment a dead server's lease expired: closes the adapter rows left
   * open beside messages that have settled since (the broker redelivered them to a live server,
   * which ran them). Safe while other servers work on the execution: a settled message has no live
   * invocation. Returns how many it closed. `open`: every open row of the execution, read after a
   * flush, when the caller has it.
   */
  async closeInvocationsOfSettledMessages(
    executionId: string,
    open?: readonly LineageRow[],
  ): Promise<number> {
    const dead = await invocationsOfSettledMessages(this.#lineage, executionId, open);
    if (dead.length === 0) return 0;
    await abandonAdapterRows(this.#lineage, dead);
    this.#logger.info(`closed ${dead.length} adapter rows a dead server left beside settled messages`, {
      executionId,
    });
    return dead.length;
  }

  /**
   * A process killed mid-invocation never closes the invocation's adapter row, and a redelivery
   * runs under a new row id, so the stale row would stay open and block completion for ever. No
   * orchestrator of this execution runs here, so every open adapter row belongs to a dead
   * invocation. (Message rows stay open: their messages run again and close them.)
   */
  async #abandonOpenAdapterRows(executionId: string): Promise<void> {
    await this.#lineage.flush();
    const stale = (await openRowsOf(this.#lineage, executionId, "adapter")).map((row) => row.id);
    if (stale.length === 0) return;
    await abandonAdapterRows(this.#lineage, stale);
    this.#logger.info(`closed ${stale.length} adapter rows left open by a stopped process`, {
      executionId,
    });
  }

  async get(executionId: string): Promise<ExecutionRecord> {
    const record = await this.#executions.getExecution(executionId);
    if (record === undefined) throw new ExecutionNotFoundError(executionId);
    return record;
  }

  /** {@link get} without the input (`null`): a status check, without parsing megabytes of items. */
  async #getWithoutInput(executionId: string): Promise<ExecutionRecord> {
    const record = await this.#executions.getExecution(executionId, { includeInput: false });
    if (record === undefined) throw new ExecutionNotFoundError(executionId);
    return record;
  }

  /**
   * {@link #getWithoutInput} for a caller that waits anyway (events, waitForEnd): a store error the
   * store marks retryable (a database connection lost mid-query) is retried with backoff until
   * `signal` aborts, so one cut connection does not end a wait that a second query would satisfy.
   */
  async #getForWaiting(executionId: string, signal: AbortSignal | undefined): Promise<ExecutionRecord> {
    for (let delayMs = 50; ; delayMs = Math.min(delayMs * 2, 2000)) {
      try {
        return await this.#getWithoutInput(executionId);
      } catch (error) {
        if (!isFactflowError(error) || !error.retryable || signal?.aborted === true) throw error;
        this.#logger.warn("reading the execution failed; retrying", {
          executionId,
          error: (error as Error).message,
          retryInMs: delayMs,
        });
        const waited = await sleep(delayMs, true, signal === undefined ? {} : { signal }).catch(() => false);
        if (!waited) throw error;
      }
    }
  }

  /** Cancels a running execution (here, or an orphaned `running` row). Returns the final status. */
  async cancel(executionId: string, reason = "cancelled by request"): Promise<ExecutionStatus> {
    if (await this.#manager.cancel(executionId, reason)) return "cancelled";
    return this.#finishOrphan(executionId, "cancelled", reason);
  }

  /** Marks an execution completed by hand (e.g. an operator closing an orphaned row). */
  complete(executionId: string): Promise<ExecutionStatus> {
    return this.#finishOrphan(executionId, "completed");
  }

  /** Marks an execution failed, stopping it if it runs here. */
  async fail(executionId: string, error: string): Promise<ExecutionStatus> {
    const orchestrator = this.#manager.get(executionId);
    if (orchestrator !== undefined) {
      await orchestrator.fail(error);
      return "failed";
    }
    return this.#finishOrphan(executionId, "failed", error);
  }

  /**
   * When an execution running in this process last made progress and what its routes are doing
   * (memory only); undefined when it does not run here.
   */
  progress(executionId: string): ExecutionProgress | undefined {
    return this.#manager.get(executionId)?.progress();
  }

  /**
   * What an execution running here is waiting for, whether or not it is stalled: its routes' work,
   * what lineage and the broker hold for it (bounded reads). Undefined when it does not run here.
   */
  async diagnose(executionId: string): Promise<StallDiagnosis | undefined> {
    return this.#manager.get(executionId)?.diagnose();
  }

  /**
   * The stall of an execution running here that has made no progress for the engine's
   * `stallAfterMs` (as diagnosed when it was noticed, with its quiet time brought up to date), or
   * undefined while it progresses, once it has ended, or when it does not run here.
   */
  stall(executionId: string): StallDiagnosis | undefined {
    return this.#manager.get(executionId)?.stall();
  }

  /** Calls `listener` with the kept events after `afterId`, then live ones; returns unsubscribe. */
  subscribe(executionId: string, listener: ExecutionEventListener, afterId = 0): () => void {
    return this.hub.subscribe(executionId, listener, afterId);
  }

  /**
   * The execution's events after `afterId` (SSE Last-Event-ID), then live ones, ending after the
   * terminal event. For an execution that ended before this process kept its history, yields one
   * synthesized terminal event.
   */
  async *events(
    executionId: string,
    options: { afterId?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<ExecutionEvent> {
    const record = await this.#getForWaiting(executionId, options.signal);
    if (record.status !== "running" && !this.hub.has(executionId)) {
      this.hub.emit(executionId, record.status, record.error === null ? {} : { error: record.error });
    }
    const buffer: ExecutionEvent[] = [];
    let wake: (() => void) | undefined;
    const unsubscribe = this.hub.subscribe(
      executionId,
      (event) => {
        buffer.push(event);
        wake?.();
      },
      options.afterId ?? 0,
    );
    const onAbort = () => wake?.();
    options.signal?.addEventListener("abort", onAbort);
    try {
      while (!options.signal?.aborted) {
        const event = buffer.shift();
        if (event === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        yield event;
        if (TERMINAL_EVENT_TYPES.has(event.type)) return;
      }
    } finally {
      unsubscribe();
      options.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Resolves with the final status once the execution ends. */
  async waitForEnd(executionId: string, timeoutMs?: number): Promise<ExecutionStatus> {
    const signal = timeoutMs === undefined ? undefined : AbortSignal.timeout(timeoutMs);
    for await (const event of this.events(executionId, signal ? { signal } : {})) {
      if (TERMINAL_EVENT_TYPES.has(event.type)) return event.type as ExecutionStatus;
    }
    return (await this.#getWithoutInput(executionId)).status;
  }

  async #start(record: ExecutionRecord, seed: ExecutionSeed, slot: StartSlot): Promise<void> {
    const emit = (type: Parameters<ExecutionEventHub["emit"]>[1], data: Record<string, JsonValue>) =>
      this.hub.emit(record.id, type, data);
    emit("started", {
      configName: record.configName,
      ...(record.parentExecutionId === null ? {} : { parentExecutionId: record.parentExecutionId }),
      ...(record.replayFromRoute === null ? {} : { replayFromRoute: record.replayFromRoute }),
    });
    try {
      await this.#manager.start({
        executionId: record.id,
        record,
        config: record.configSnapshot,
        seed,
        emit,
        slot,
      });
    } catch (error) {
      // The orchestrator marks its own start failures; one refused before it exists (the engine
      // shut down while the row was written) is marked here.
      if (!this.hub.isEnded(record.id)) {
        const message = (error as Error).message;
        await this.#executions.finishExecution(record.id, "failed", { error: message }).catch(() => false);
        emit("failed", { error: message });
      }
      this.#logger.error("execution failed to start", {
        executionId: record.id,
        error: (error as Error).message,
      });
      throw error;
    }
  }

  async #finishOrphan(
    executionId: string,
    status: Exclude<ExecutionStatus, "running">,
    error?: string,
  ): Promise<ExecutionStatus> {
    const record = await this.get(executionId);
    if (record.status !== "running") return record.status;
    await this.#executions.finishExecution(executionId, status, error === undefined ? {} : { error });
    this.hub.emit(executionId, status, error === undefined ? {} : { error });
    return status;
  }
}
