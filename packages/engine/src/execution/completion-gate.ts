import type { LineageProtocol, Logger } from "@factflow/protocols";
import type { RouteProcessor } from "../delivery/route-processor.js";
import type { LineageReconciler } from "../lineage/lineage-reconciler.js";

export interface CompletionGateOptions {
  readonly executionId: string;
  readonly processors: readonly RouteProcessor[];
  readonly lineage: LineageProtocol;
  readonly logger: Logger;
  /** Called once, when the execution is complete. */
  readonly onComplete: () => void;
  /**
   * Safety-net poll, in ms: the first one after any activity. Each further poll without activity
   * in between waits twice as long, up to `maxPollMs`, so a process that holds no work for the
   * execution (a cluster server while others run it, or one waiting on a long retry) does not ask
   * the database every 250 ms. @default 250
   */
  readonly pollMs?: number;
  /** Longest pause between two safety-net polls while nothing happens here, in ms. @default 2000 */
  readonly maxPollMs?: number;
  /**
   * Poll only while this process holds work of the execution (cluster mode, a server that joined an
   * execution it does not own). Once a check has run undisturbed and found every route here idle,
   * nothing held in a batch and lineage rows still open, those rows are another process's work: the
   * polls stop until a delivery starts here again or {@link CompletionGate.nudge} / {@link
   * CompletionGate.pollAlways} is called. The owner completes what ends on no server of its own, and
   * runs the reconciler. @default false
   */
  readonly pollOnlyWhileBusy?: boolean;
  /** Closes rows whose closing write was lost, once idle with open rows long enough. */
  readonly reconciler?: LineageReconciler;
  /**
   * True when the broker holds nothing for the execution. Checked last: copies that carry no open
   * row (re-seeded copies behind their originals, a parent's duplicate publish) must be consumed
   * before the execution ends, or they would be left in its queues.
   */
  readonly queuesDrained?: () => Promise<boolean>;
  /**
   * True once the execution has been seeded (cluster mode: a server that joined an execution must
   * not call it complete before its creator has registered the seed). Checked until it is true once.
   */
  readonly seeded?: () => Promise<boolean>;
}

/**
 * Decides when an execution is complete: at one moment every route is idle (no handler working, no
 * fan-out publish pending, no message held in a batch) AND lineage has no open row after a flush.
 * "One moment" is enforced with an activity epoch: any delivery starting while the lineage query
 * runs invalidates the answer. Checks run as soon as a handler finishes (low latency) and on a slow
 * poll. When the only open rows are messages held in stateful batches, the route has drained and
 * the batches are flushed instead.
 */
export class CompletionGate {
  readonly #options: CompletionGateOptions;
  #epoch = 0;
  #running = false;
  #again = false;
  #closed = false;
  #started = false;
  #poll: NodeJS.Timeout | undefined;
  /** Polls since the last activity: the next one waits `pollMs * 2^quietPolls` (capped). */
  #quietPolls = 0;
  #seeded = false;
  #pollOnlyWhileBusy: boolean;
  /** No poll scheduled: the last undisturbed check left nothing of this process's open (see `pollOnlyWhileBusy`). */
  #dormant = false;

  constructor(options: CompletionGateOptions) {
    this.#options = options;
    this.#pollOnlyWhileBusy = options.pollOnlyWhileBusy === true;
  }

  /** True while no safety-net poll is scheduled because this process holds no work of the execution. */
  get isDormant(): boolean {
    return this.#dormant;
  }

  /** From now on the gate polls whether or not work is held here (this server took the execution over). */
  pollAlways(): void {
    this.#pollOnlyWhileBusy = false;
    this.nudge();
  }

  /** Starts checking. Until then nothing can complete: the seed is still being published. */
  start(): void {
    this.#started = true;
    // Not unref'd: a running execution is work the process still has to finish. When the check at the
    // end of the last delivery saw a moment that was not quite idle (a lineage write still queued),
    // this poll is what completes the execution; unref'd, `factflow run` could exit first.
    this.#schedule();
    this.trigger();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#poll);
  }

  /** A delivery started: any check in progress no longer describes "one moment". */
  activity(): void {
    this.#epoch++;
    this.#options.reconciler?.reset();
    // Back to the short poll; rescheduled only on the first activity after quiet polls (or after
    // polls stopped for want of work here).
    if ((this.#quietPolls > 0 || this.#dormant) && !this.#closed && this.#started) {
      this.#quietPolls = 0;
      this.#dormant = false;
      this.#schedule();
    }
  }

  /** Something outside the deliveries changed lineage (a takeover closed rows): check now and soon. */
  nudge(): void {
    this.activity();
    this.trigger();
  }

  #schedule(): void {
    clearTimeout(this.#poll);
    const base = this.#options.pollMs ?? 250;
    const delay = Math.min(base * 2 ** this.#quietPolls, Math.max(base, this.#options.maxPollMs ?? 2000));
    this.#poll = setTimeout(() => {
      this.#poll = undefined;
      if (this.#closed || this.#dormant) return;
      this.#quietPolls = Math.min(this.#quietPolls + 1, 20);
      this.trigger();
      this.#schedule();
    }, delay);
  }

  /** Something finished; check soon if everything looks idle. */
  trigger(): void {
    if (!this.#started || this.#closed || !this.#activeIdle()) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    void this.#loop();
  }

  /** Asked at the end of every delivery: a plain loop, no callback. */
  #activeIdle(): boolean {
    const processors = this.#options.processors;
    for (let i = 0; i < processors.length; i++)
      if (!(processors[i] as RouteProcessor).isActiveIdle) return false;
    return true;
  }

  async #loop(): Promise<void> {
    try {
      do {
        this.#again = false;
        await this.#checkOnce();
      } while (this.#again && !this.#closed);
    } catch (error) {
      this.#options.logger.warn("completion check failed; retrying on the next poll", {
        error: (error as Error).message,
      });
    } finally {
      this.#running = false;
    }
  }

  async #checkOnce(): Promise<void> {
    if (this.#closed || !this.#activeIdle()) return;
    const epoch = this.#epoch;
    const { lineage, executionId, processors } = this.#options;
    // Before the count, never after it: a count taken before the creator registered the seed says
    // 0 open rows about an execution that has not begun, and a later "seeded" cannot make it true.
    if (!this.#seeded) {
      if (this.#options.seeded !== undefined && !(await this.#options.seeded())) return;
      this.#seeded = true;
    }
    // `countOpen` sees every write made before it (stores flush, or count in memory, themselves);
    // a full `flush` here would also write out the open rows a store holds back for a moment, and
    // turn each quick hop back into an insert and an update.
    const open = await lineage.countOpen(executionId);
    if (this.#closed || epoch !== this.#epoch || !this.#activeIdle()) return;
    const held = processors.reduce((sum, p) => sum + p.heldCount, 0);
    if (held === 0 && open === 0) {
      // The last handler has returned, but the provider settles its delivery in the callbacks that
      // follow that return. One turn of the event loop lets them run, so no subscription stops
      // under an acknowledgement still on its way (the message would be handed back).
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (this.#closed || epoch !== this.#epoch || !this.#activeIdle()) return;
      if (this.#options.queuesDrained !== undefined && !(await this.#options.queuesDrained())) return;
      if (this.#closed || epoch !== this.#epoch || !this.#activeIdle()) return;
      this.close();
      this.#options.onComplete();
    } else if (held === 0 && this.#pollOnlyWhileBusy) {
      // Nothing of this process is open: the rows are another server's work (or a retry on its way
      // back through the broker, which starts a delivery somewhere). Stop polling until one starts
      // here; the owner polls on, and reconciles lost writes.
      this.#dormant = true;
      clearTimeout(this.#poll);
      this.#poll = undefined;
    } else if (held === 0) {
      // Idle, nothing held, rows still open: normal while a retry is on its way; for ever if a
      // closing write was lost. The reconciler tells the two apart after a bounded time.
      if (await this.#options.reconciler?.idleWithOpenRows()) this.#again = true;
    } else if (held > 0 && open === held) {
      // Nothing else is anywhere in the pipeline: the batches will not fill further.
      for (const processor of processors) {
        for (const index of processor.batches.keys()) await processor.flushBatch(index);
      }
    }
  }
}
