import { setImmediate as nextTurn } from "node:timers/promises";
import {
  type ExecutionRecord,
  JsonHazardWalk,
  type JsonValue,
  type PipelineConfig,
  PipelineError,
} from "@factflow/protocols";
import { TooManyConcurrentExecutionsError } from "../errors.js";
import type { ExecutionEventType } from "./execution-events.js";
import { callHook, type ExecutionHooks } from "./execution-hooks.js";
import { ExecutionScopedQueue } from "./execution-scoped-queue.js";
import {
  type ExecutionSeed,
  type OrchestratorEnd,
  type OrchestratorServices,
  PipelineOrchestrator,
} from "./pipeline-orchestrator.js";
import { publishReseed, type ReseedMessage } from "./reseed.js";

/** Bytes of an init message's encoding kept for its headers (ids, attempt, execution, trace). */
const INIT_HEADER_ROOM = 4096;

/**
 * Values of an execution input checked per turn of the event loop: under a millisecond once the walk
 * is compiled, 10–20 ms before (a 5 MB input of 300 000 items holds 600 000 values).
 */
const HAZARD_VALUES_PER_TURN = 32_768;

export interface OrchestratorManagerOptions extends OrchestratorServices {
  /** Executions running at once in this process. @default 10 */
  readonly maxConcurrent?: number;
  /** Interval of `route_progress` events, in ms. @default 500 */
  readonly progressIntervalMs?: number;
  /** Told when each execution starts and stops running here. @default no hooks */
  readonly hooks?: ExecutionHooks;
}

/** A start request: which execution, from which config, seeded how, reporting where. */
export interface StartRequest {
  readonly executionId: string;
  /** The execution's row, handed to the lifecycle hooks. */
  readonly record: ExecutionRecord;
  readonly config: PipelineConfig;
  readonly seed: ExecutionSeed;
  readonly emit: (type: ExecutionEventType, data: Record<string, JsonValue>) => void;
  /**
   * Joins an execution another server started (cluster mode): consumes its queues, publishes no
   * seed, does not count against `maxConcurrent`, and a failed join leaves the execution running.
   */
  readonly participant?: boolean;
  /** A slot taken by `reserve` for this start; without one, `start` takes a slot itself. */
  readonly slot?: StartSlot;
}

/** One of the `maxConcurrent` slots, taken by `OrchestratorManager.reserve`. */
export interface StartSlot {
  /** Gives the slot back unless `start` turned it into a running execution. Idempotent. */
  release(): void;
}

/**
 * Keeps the running orchestrators of this process and caps them at `maxConcurrent`; over the cap
 * `reserve` (and `start` without a slot) throws `TooManyConcurrentExecutionsError`. A slot is taken
 * synchronously, so concurrent starts cannot overshoot.
 */
export class OrchestratorManager {
  readonly maxConcurrent: number;
  readonly #services: OrchestratorManagerOptions;
  readonly #running = new Map<string, PipelineOrchestrator>();
  /** Ids of the running orchestrators that only joined (see `StartRequest.participant`). */
  readonly #participants = new Set<string>();
  /** `onExecutionEnded` calls under way, so shutdown can wait for them. */
  readonly #ending = new Set<Promise<void>>();
  #reserved = 0;
  #closed = false;

  constructor(options: OrchestratorManagerOptions) {
    this.#services = options;
    this.maxConcurrent = options.maxConcurrent ?? 10;
  }

  /** Throws `TooManyConcurrentExecutionsError` when no slot is free. */
  assertCapacity(): void {
    this.#assertOpen();
    if (this.#running.size - this.#participants.size + this.#reserved >= this.maxConcurrent)
      throw new TooManyConcurrentExecutionsError(this.maxConcurrent);
  }

  /**
   * Takes a slot now or throws `TooManyConcurrentExecutionsError`. Take it before writing anything
   * for a start (the execution row, closing a resumed execution's stale rows), so a refused start
   * leaves nothing behind; then hand it to `start`, and `release` it in any case once `start` has
   * returned or thrown, or when the start is given up before it.
   */
  reserve(): StartSlot {
    this.assertCapacity();
    this.#reserved++;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.#reserved--;
      },
    };
  }

  #assertOpen(): void {
    if (this.#closed) {
      throw new PipelineError(
        "cancelled",
        "[factflow/engine] the engine is shut down; no new execution can start",
      );
    }
  }

  /**
   * Refuses an init message the provider could never carry (or a database could never store) before
   * any execution row is written, so a refused start leaves nothing behind. Returns the input as JSON
   * text (undefined without an input), which the execution's row then stores as it is. Walking a
   * 5 MB input takes tens of milliseconds, so it goes {@link HAZARD_VALUES_PER_TURN} values per turn
   * of the event loop; serialising it gets a turn of its own.
   */
  async checkInput(input: JsonValue | null | undefined): Promise<string | undefined> {
    if (input === null || input === undefined) return undefined;
    const walk = new JsonHazardWalk(input);
    while (!walk.advance(HAZARD_VALUES_PER_TURN)) await nextTurn();
    const hazard = walk.hazard;
    if (hazard !== undefined) {
      throw new PipelineError(
        "invalid_message",
        `[factflow/engine] the execution input at ${hazard.path} ${hazard.message}`,
      );
    }
    await nextTurn();
    const limit = this.#services.queue.capabilities.maxMessageBytes - INIT_HEADER_ROOM;
    const text = JSON.stringify(input);
    const bytes = Buffer.byteLength(text, "utf8");
    if (bytes > limit) {
      throw new PipelineError(
        "message_too_large",
        `[factflow/engine] the execution input is ${bytes} bytes of JSON; the ${this.#services.queue.name} provider carries at most ${limit} (maxMessageBytes less room for headers): store large inputs as artefacts and pass a reference`,
      );
    }
    return text;
  }

  /** Starts an orchestrator; resolves once every route is subscribed and the seed is published. */
  async start(request: StartRequest): Promise<PipelineOrchestrator> {
    const participant = request.participant === true;
    const existing = this.#running.get(request.executionId);
    if (existing !== undefined) {
      // Joining what runs here already is a no-op; starting it twice would be a bug.
      if (participant) return existing;
      throw new PipelineError(
        "invalid_argument",
        `[factflow/engine] execution ${request.executionId} already runs in this process`,
      );
    }
    let slot: StartSlot | undefined;
    if (participant) {
      if (this.#closed)
        throw new PipelineError("cancelled", "[factflow/engine] the engine is shut down; not joining");
    } else if (request.slot === undefined) {
      slot = this.reserve();
    } else {
      // The slot was taken while the caller wrote the row; the engine may have shut down since.
      this.#assertOpen();
      slot = request.slot;
    }
    const onStalled = this.#services.hooks?.onExecutionStalled;
    let orchestrator: PipelineOrchestrator;
    try {
      orchestrator = new PipelineOrchestrator({
        ...this.#services,
        executionId: request.executionId,
        config: request.config,
        seed: request.seed,
        emit: request.emit,
        ...(participant ? { participant: true } : {}),
        ...(this.#services.progressIntervalMs === undefined
          ? {}
          : { progressIntervalMs: this.#services.progressIntervalMs }),
        ...(onStalled === undefined
          ? {}
          : {
              onStall: (diagnosis) =>
                void callHook(this.#services.logger, "onExecutionStalled", request.record.id, () =>
                  onStalled(request.record, diagnosis),
                ),
            }),
      });
      this.#running.set(request.executionId, orchestrator);
      if (participant) this.#participants.add(request.executionId);
    } finally {
      // The running map counts it now (or it never started): the slot has served.
      slot?.release();
    }
    const { hooks, logger } = this.#services;
    const { record } = request;
    const ended = orchestrator.done.then(async (end) => {
      // Only this orchestrator's entry: a later join of the same execution may have replaced it.
      if (this.#running.get(request.executionId) === orchestrator) {
        this.#running.delete(request.executionId);
        this.#participants.delete(request.executionId);
      }
      const onEnded = hooks?.onExecutionEnded;
      if (onEnded !== undefined)
        await callHook(logger, "onExecutionEnded", record.id, () =>
          onEnded(record, end, { owner: orchestrator.owner }),
        );
    });
    this.#ending.add(ended);
    void ended.finally(() => this.#ending.delete(ended));
    // Before the orchestrator subscribes or publishes: the application labels what it will see.
    const onStarted = hooks?.onExecutionStarted;
    if (onStarted !== undefined)
      await callHook(logger, "onExecutionStarted", record.id, () => onStarted(record));
    await orchestrator.start();
    return orchestrator;
  }

  /**
   * Re-publishes open message rows of an execution (marked re-seeded, so a copy of a message that
   * settled meanwhile is acknowledged unrun) into its scoped queues: a resume, or a cluster
   * takeover, of an execution whose routes are already consumed.
   */
  async reseed(record: ExecutionRecord, messages: readonly ReseedMessage[]): Promise<void> {
    const queue = new ExecutionScopedQueue(this.#services.queue, record.id);
    const logger = this.#services.logger.child({ executionId: record.id });
    const settled = this.#running.get(record.id)?.settled;
    await publishReseed(queue, record.configSnapshot, messages, logger, {
      ...(settled === undefined ? {} : { settled }),
    });
  }

  get(executionId: string): PipelineOrchestrator | undefined {
    return this.#running.get(executionId);
  }

  /** True when the execution runs here only because this process joined it (cluster mode). */
  isParticipant(executionId: string): boolean {
    return this.#participants.has(executionId);
  }

  /** Ids of the executions running in this process. */
  active(): string[] {
    return [...this.#running.keys()];
  }

  /** Cancels a running execution; false if it is not running here. */
  async cancel(executionId: string, reason?: string): Promise<boolean> {
    const orchestrator = this.#running.get(executionId);
    if (orchestrator === undefined) return false;
    await orchestrator.cancel(reason);
    return true;
  }

  /**
   * Graceful shutdown: refuses new starts and stops every orchestrator (subscriptions first; handlers
   * in flight are aborted and their messages redelivered later). Execution rows stay `running`, so a
   * restarted server can `resume` them; pass `{ cancel: true }` to mark them cancelled instead.
   */
  async shutdown(options: { cancel?: boolean } = {}): Promise<OrchestratorEnd[]> {
    this.#closed = true;
    const all = [...this.#running.values()];
    const ends = await Promise.all(
      all.map((o) => (options.cancel === true ? o.cancel("server shutting down") : o.stop())),
    );
    await Promise.allSettled([...this.#ending]);
    return ends;
  }
}
