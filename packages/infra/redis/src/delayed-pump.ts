import type { Logger } from "@factflow/protocols";
import type { Redis } from "ioredis";
import type { LaneKeys } from "./naming.js";
import { PROMOTE, runScript } from "./scripts.js";

/** Entries one promotion moves at most; a full batch triggers the next one at once. */
const BATCH = 200;

/**
 * Moves the due entries of one lane's delayed set into its stream. It wakes when the next entry this
 * process knows about is due (its own retries and delayed publishes call {@link DelayedPump.wakeIn})
 * and at least every `pollMs`, for entries other processes scheduled. Promotion is one Lua script,
 * so several processes pumping the same lane never move an entry twice.
 */
export class DelayedPump {
  private timer: NodeJS.Timeout | undefined;
  private wakeAt = Number.POSITIVE_INFINITY;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly redis: Redis,
    private readonly lane: LaneKeys,
    private readonly pollMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.wakeIn(0);
  }

  /** Runs a promotion in `ms` (or sooner, if one is already planned earlier). */
  wakeIn(ms: number): void {
    if (this.stopped) return;
    const at = Date.now() + Math.max(0, ms);
    if (at >= this.wakeAt) return;
    clearTimeout(this.timer);
    this.wakeAt = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, ms));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private fire(): void {
    this.timer = undefined;
    this.wakeAt = Number.POSITIVE_INFINITY;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.promote().finally(() => {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.wakeIn(0);
      }
    });
  }

  private async promote(): Promise<void> {
    if (this.stopped) return;
    try {
      const [moved, wait] = await runScript<[number, number]>(
        this.redis,
        PROMOTE,
        [this.lane.delayed, this.lane.stream],
        [BATCH],
      );
      if (moved >= BATCH) this.wakeIn(0);
      else this.wakeIn(wait < 0 ? this.pollMs : Math.min(wait, this.pollMs));
    } catch (error) {
      this.logger.warn("redis could not promote delayed messages; trying again", {
        destination: this.lane.destination,
        error: error instanceof Error ? error.message : String(error),
      });
      this.wakeIn(this.pollMs);
    }
  }
}
