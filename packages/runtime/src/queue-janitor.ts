import { scopedDestination } from "@factflow/engine";
import type { DeleteDestinationResult, Logger, PipelineConfig, QueueProtocol } from "@factflow/protocols";
import type { FactflowMetrics } from "./metrics.js";

/** How one scoped queue fared when its execution ended. */
export type CleanupOutcome = "deleted" | "kept_dead_letters" | "absent" | "refused" | "failed";

export interface QueueJanitorOptions {
  readonly provider: QueueProtocol;
  readonly logger: Logger;
  readonly metrics?: FactflowMetrics;
  /**
   * Tries per queue while the broker still reports consumers (some brokers detach a stopped
   * subscription asynchronously). @default 3
   */
  readonly attempts?: number;
  /** Pause between those tries, in ms. @default 500 */
  readonly retryDelayMs?: number;
}

/**
 * The broker destinations an execution's routes used: every inbound and outbound queue of the
 * snapshot, scoped the way the engine scopes them (`scopedDestination`). Routes only name queues:
 * topics are shared across executions and never scoped or cleaned up.
 *
 * @param _provider unused (naming does not depend on the provider); kept for existing callers
 */
export function scopedDestinations(
  _provider: QueueProtocol,
  executionId: string,
  config: PipelineConfig,
): string[] {
  const names = new Set<string>();
  for (const route of Object.values(config.routes)) {
    names.add(route.inbound.queue);
    for (const name of route.outbound) names.add(name);
  }
  return [...names].map((name) => scopedDestination(executionId, name));
}

/**
 * Deletes an execution's scoped queues once it has ended, so a long-running server does not leave
 * one set of broker queues behind per execution. Deletion is `ifEmpty` (a queue still holding
 * messages stays, and says why in the log) and keeps dead-letter queues that hold messages, so
 * failures stay inspectable and redrivable. Nothing here ever throws: outcomes are logged and counted
 * in `factflow_queue_cleanup_total{outcome}`.
 */
export class QueueJanitor {
  private readonly tallies = new Map<CleanupOutcome, number>();
  private readonly attempts: number;
  private readonly retryDelayMs: number;
  private stopped = false;
  private readonly running = new Set<Promise<unknown>>();
  /** The sweep under way per execution id. */
  private readonly sweeping = new Map<string, Promise<unknown>>();

  constructor(private readonly options: QueueJanitorOptions) {
    this.attempts = Math.max(1, options.attempts ?? 3);
    this.retryDelayMs = options.retryDelayMs ?? 500;
    options.metrics?.addCollector({
      collect: () => [
        {
          name: "factflow_queue_cleanup_total",
          help: "Execution-scoped queues handled when their execution ended, by outcome (deleted, kept_dead_letters, absent, refused, failed).",
          type: "counter",
          samples: [...this.tallies].map(([outcome, value]) => ({ labels: { outcome }, value })),
        },
      ],
    });
  }

  /** Count of queues per outcome so far. */
  count(outcome: CleanupOutcome): number {
    return this.tallies.get(outcome) ?? 0;
  }

  /** Deletes the scoped queues of an ended execution; resolves with the outcome per destination. */
  sweep(executionId: string, config: PipelineConfig): Promise<Map<string, CleanupOutcome>> {
    const work = this.run(executionId, config);
    this.running.add(work);
    this.sweeping.set(executionId, work);
    void work.finally(() => {
      this.running.delete(work);
      if (this.sweeping.get(executionId) === work) this.sweeping.delete(executionId);
    });
    return work;
  }

  /**
   * Resolves once no sweep of `executionId` is under way. A dead-letter redrive or discard on an
   * ended execution's queue waits for it: the sweep closes that queue's producer and deletes the
   * queue, which made a concurrent redrive fail on Pulsar.
   */
  async idle(executionId: string): Promise<void> {
    await this.sweeping.get(executionId)?.catch(() => undefined);
  }

  /** Stops starting new deletions (the provider is about to close) and waits for those under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.running]);
  }

  private async run(executionId: string, config: PipelineConfig): Promise<Map<string, CleanupOutcome>> {
    const outcomes = new Map<string, CleanupOutcome>();
    let destinations: string[];
    try {
      destinations = scopedDestinations(this.options.provider, executionId, config);
    } catch (error) {
      this.options.logger.warn("queue cleanup: could not compute the execution's queues", {
        executionId,
        error: (error as Error).message,
      });
      this.tally("failed");
      return outcomes;
    }
    for (const destination of destinations) {
      if (this.stopped) break;
      const outcome = await this.deleteOne(executionId, destination);
      outcomes.set(destination, outcome);
      this.tally(outcome);
    }
    return outcomes;
  }

  private async deleteOne(executionId: string, destination: string): Promise<CleanupOutcome> {
    const { provider, logger } = this.options;
    let result: DeleteDestinationResult | undefined;
    try {
      for (let attempt = 1; attempt <= this.attempts && !this.stopped; attempt++) {
        result = await provider.admin.deleteDestination({ destination }, { ifEmpty: true });
        if (result.deleted || !/consumer/i.test(result.reason ?? "")) break;
        if (attempt < this.attempts) await pause(this.retryDelayMs);
      }
    } catch (error) {
      logger.warn("queue cleanup: deleting an execution queue failed", {
        executionId,
        destination,
        error: (error as Error).message,
      });
      return "failed";
    }
    if (result === undefined) return "refused";
    if (result.deleted) {
      const kept = result.deadLettersKept ?? 0;
      if (kept > 0) {
        logger.info("queue cleanup: queue deleted, dead letters kept", { executionId, destination, kept });
        return "kept_dead_letters";
      }
      logger.debug("queue cleanup: queue deleted", { executionId, destination });
      return "deleted";
    }
    // Never used (a route that received nothing) is the common, harmless case.
    if (/does not exist/.test(result.reason ?? "")) return "absent";
    logger.info("queue cleanup: queue left in place", {
      executionId,
      destination,
      reason: result.reason ?? "",
    });
    return "refused";
  }

  private tally(outcome: CleanupOutcome): void {
    this.tallies.set(outcome, (this.tallies.get(outcome) ?? 0) + 1);
  }
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
