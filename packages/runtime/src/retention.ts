import { type ExecutionStoreProtocol, FactflowError, type Logger } from "@factflow/protocols";
import type { FactflowMetrics } from "./metrics.js";

const DAY_MS = 86_400_000;

/** What started a retention run. */
export type RetentionTrigger = "schedule" | "request";

/** The outcome of one retention run. */
export interface RetentionResult {
  readonly olderThanDays: number;
  /** Executions that finished before this instant were deleted (ISO 8601). */
  readonly before: string;
  /** Executions deleted, with their lineage. */
  readonly deleted: number;
  readonly durationMs: number;
  readonly trigger: RetentionTrigger;
}

export interface RetentionJobOptions {
  readonly executions: Pick<ExecutionStoreProtocol, "deleteExecutionsBefore">;
  readonly logger: Logger;
  readonly metrics?: FactflowMetrics;
  /** Scheduled runs delete executions finished more than this many days ago; 0 turns the schedule off. */
  readonly retentionDays: number;
  /** Time between scheduled runs. @default 3_600_000 (hourly) */
  readonly intervalMs?: number;
  /** Delay of the first scheduled run after `start()`, so start-up is not slowed. @default 60_000 */
  readonly initialDelayMs?: number;
  /** Clock, for tests. @default Date.now */
  readonly now?: () => number;
}

/**
 * Deletes finished executions (and their lineage) older than a number of days, on a schedule and on
 * demand. Runs never overlap: an on-demand run waits for the one under way, and a scheduled tick
 * that finds a run under way is skipped (and counted). Timers are unref'd so they never keep the
 * process alive. Running executions are never deleted (the store only deletes finished ones).
 */
export class RetentionJob {
  private timer: NodeJS.Timeout | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private pending = 0;
  private stopped = false;
  private readonly tallies = new Map<string, number>();
  private deletedTotal = 0;
  private readonly now: () => number;

  constructor(private readonly options: RetentionJobOptions) {
    this.now = options.now ?? Date.now;
    options.metrics?.addCollector({
      collect: () => [
        {
          name: "factflow_retention_runs_total",
          help: "Retention runs, by trigger (schedule, request) and outcome (ok, failed, skipped: a scheduled tick while a run was under way).",
          type: "counter",
          samples: [...this.tallies].map(([key, value]) => {
            const [trigger = "", outcome = ""] = key.split("|");
            return { labels: { trigger, outcome }, value };
          }),
        },
        {
          name: "factflow_retention_executions_deleted_total",
          help: "Finished executions deleted by retention, with their lineage.",
          type: "counter",
          samples: [{ value: this.deletedTotal }],
        },
      ],
    });
  }

  /** True while a run is under way or waiting for one. */
  get busy(): boolean {
    return this.pending > 0;
  }

  /** Runs of a trigger and outcome so far. */
  count(trigger: RetentionTrigger, outcome: "ok" | "failed" | "skipped"): number {
    return this.tallies.get(`${trigger}|${outcome}`) ?? 0;
  }

  /** Starts the schedule when `retentionDays` > 0. Idempotent. */
  start(): void {
    const { retentionDays, intervalMs = 3_600_000, initialDelayMs = 60_000 } = this.options;
    if (retentionDays <= 0 || this.timer !== undefined || this.stopped) return;
    this.options.logger.info("retention scheduled", { retentionDays, intervalMs });
    const tick = () => {
      if (this.stopped) return;
      this.tick();
      this.timer = setTimeout(tick, intervalMs);
      this.timer.unref();
    };
    this.timer = setTimeout(tick, initialDelayMs);
    this.timer.unref();
  }

  /** Stops the schedule and waits for a run under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.chain;
  }

  /**
   * Deletes executions finished more than `olderThanDays` days ago (fractions allowed; 0 = every
   * finished execution). Waits for a run under way first.
   */
  run(olderThanDays: number, trigger: RetentionTrigger = "request"): Promise<RetentionResult> {
    if (!Number.isFinite(olderThanDays) || olderThanDays < 0) {
      return Promise.reject(
        new FactflowError(
          "invalid_argument",
          `[factflow/server] older_than_days must be a number >= 0 (got ${String(olderThanDays)})`,
        ),
      );
    }
    this.pending += 1;
    const work = this.chain.then(() => this.execute(olderThanDays, trigger));
    this.chain = work.catch(() => undefined);
    return work.finally(() => {
      this.pending -= 1;
    });
  }

  private tick(): void {
    if (this.busy) {
      this.tally("schedule", "skipped");
      this.options.logger.info("retention: previous run still under way, skipping this one");
      return;
    }
    // Failures are logged and counted by execute(); the schedule goes on.
    this.run(this.options.retentionDays, "schedule").catch(() => undefined);
  }

  private async execute(olderThanDays: number, trigger: RetentionTrigger): Promise<RetentionResult> {
    const started = this.now();
    const before = new Date(started - olderThanDays * DAY_MS);
    const clock = performance.now();
    try {
      const deleted = await this.options.executions.deleteExecutionsBefore(before);
      const result: RetentionResult = {
        olderThanDays,
        before: before.toISOString(),
        deleted,
        durationMs: Math.round(performance.now() - clock),
        trigger,
      };
      this.deletedTotal += deleted;
      this.tally(trigger, "ok");
      this.options.logger.info("retention: deleted finished executions with their lineage", { ...result });
      return result;
    } catch (error) {
      this.tally(trigger, "failed");
      this.options.logger.error("retention run failed", {
        trigger,
        olderThanDays,
        before: before.toISOString(),
        error: (error as Error).message,
      });
      throw error;
    }
  }

  private tally(trigger: RetentionTrigger, outcome: string): void {
    const key = `${trigger}|${outcome}`;
    this.tallies.set(key, (this.tallies.get(key) ?? 0) + 1);
  }
}
