import type { Logger } from "@factflow/protocols";
import type { FactflowRuntime } from "@factflow/runtime";

/** Executions looked at per start: the oldest running ones beyond it wait for the next start. */
const RESUME_LIMIT = 500;

/**
 * What a server on the embedded provider does at start with the executions the database says are
 * `running` (nobody else consumes its queues, so nobody else would finish them): it resumes those
 * whose owner is gone (a process that stopped or died: its lease was given back or expired, or it
 * is an earlier process of this data directory), and leaves those of a live process to it. It looks
 * at those again every lease period and resumes any whose owner has died since without ending them.
 */
export class OrphanResumer {
  readonly #runtime: FactflowRuntime;
  readonly #logger: Logger;
  /** Running executions another live process owns, by id. */
  readonly #leftToOwner = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #pass: Promise<void> | undefined;
  #stopped = false;

  constructor(runtime: FactflowRuntime, logger: Logger) {
    this.#runtime = runtime;
    this.#logger = logger;
  }

  /** Resumes what was left running (in the background); resolves when the first pass is done. */
  start(): Promise<void> {
    this.#pass = this.#firstPass().finally(() => {
      this.#pass = undefined;
    });
    return this.#pass;
  }

  /** Stops looking; waits for a pass under way. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearInterval(this.#timer);
    await this.#pass;
  }

  async #firstPass(): Promise<void> {
    let ids: string[];
    try {
      const { items } = await this.#runtime.executions.listExecutions({
        status: "running",
        limit: RESUME_LIMIT,
        includeInput: false,
      });
      ids = items.map((record) => record.id);
    } catch (error) {
      this.#logger.warn("could not list executions to resume", { error: (error as Error).message });
      return;
    }
    for (const id of ids) await this.#resumeIfOrphaned(id);
    const ownership = this.#runtime.ownership;
    if (ownership === undefined || this.#leftToOwner.size === 0 || this.#stopped) return;
    this.#timer = setInterval(() => {
      if (this.#pass !== undefined || this.#stopped) return;
      this.#pass = this.#recheck().finally(() => {
        this.#pass = undefined;
      });
    }, ownership.leaseMs);
    this.#timer.unref();
  }

  async #recheck(): Promise<void> {
    for (const id of [...this.#leftToOwner]) await this.#resumeIfOrphaned(id);
    if (this.#leftToOwner.size === 0) clearInterval(this.#timer);
  }

  /** Resumes the execution unless a live process owns it (then it is kept to look at again). */
  async #resumeIfOrphaned(executionId: string): Promise<void> {
    if (this.#stopped) return;
    try {
      const claim = await this.#runtime.ownership?.claim(executionId);
      if (claim !== undefined && !claim.claimed && claim.owner !== null) {
        if (!this.#leftToOwner.has(executionId))
          this.#logger.info("left a running execution to the live process that owns it", {
            executionId,
            owner: claim.owner,
          });
        this.#leftToOwner.add(executionId);
        return;
      }
      this.#leftToOwner.delete(executionId);
      // Not claimed and no owner: it ended meanwhile.
      if (claim !== undefined && !claim.claimed) return;
      await this.#runtime.engine.resume(executionId);
      this.#logger.info("resumed execution left running", { executionId });
    } catch (error) {
      this.#logger.warn("could not resume execution", { executionId, error: (error as Error).message });
    }
  }
}
