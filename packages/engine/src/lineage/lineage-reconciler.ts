import type { LineageProtocol, LineageRow, LineageStatus, Logger, QueueProtocol } from "@factflow/protocols";
import type { DeliveryLedger } from "../delivery/delivery-ledger.js";

/** The lineage error a reconciled row is closed with. */
export const LINEAGE_RECONCILED = "LineageReconciled";

const OPEN: readonly LineageStatus[] = ["pending", "initiated", "processing"];
const PAGE = 500;

export interface LineageReconcilerOptions {
  readonly executionId: string;
  readonly lineage: LineageProtocol;
  readonly deliveries: DeliveryLedger;
  /** The provider, and the broker destinations of the execution's route queues. */
  readonly queue: QueueProtocol;
  readonly destinations: readonly string[];
  /** How long the execution must sit idle with open rows and nothing on the broker first. */
  readonly afterMs: number;
  readonly logger: Logger;
}

/**
 * Closes lineage rows whose closing write was lost, so an execution cannot stay `running` for ever.
 *
 * A lineage write that still fails after its retries is counted lost; if it was the write that closed
 * a row, the open count never reaches 0. Once every route has been idle with open rows for `afterMs`
 * (longer than any retry delay, so no retry is on its way) and the broker holds nothing for the
 * execution, each open message row is closed the way this process settled it (the ledger remembers),
 * or failed with `LineageReconciled` when nothing anywhere holds the message; open adapter rows are
 * closed as abandoned. Then the completion gate decides as usual.
 */
export class LineageReconciler {
  readonly #options: LineageReconcilerOptions;
  #idleSince: number | undefined;

  constructor(options: LineageReconcilerOptions) {
    this.#options = options;
  }

  /** Something happened (a delivery, or no open row any more): start the clock over. */
  reset(): void {
    this.#idleSince = undefined;
  }

  /** Called by the gate while idle with open rows; true when rows were closed (check again). */
  async idleWithOpenRows(now = Date.now()): Promise<boolean> {
    if (this.#idleSince === undefined) {
      this.#idleSince = now;
      return false;
    }
    if (now - this.#idleSince < this.#options.afterMs) return false;
    const { queue, destinations, lineage, executionId, deliveries, logger } = this.#options;
    for (const destination of destinations) {
      const stats = await queue.admin.stats({ destination });
      if (stats.depth + stats.inFlight > 0) {
        // The broker still holds work: the rows are open for a reason.
        this.#idleSince = now;
        return false;
      }
    }
    const rows = await openRows(lineage, executionId);
    const finishedAt = new Date(now).toISOString();
    let fromLedger = 0;
    let failed = 0;
    for (const row of rows) {
      if (row.kind === "adapter") {
        lineage.update(row.id, {
          status: "abandoned",
          finishedAt,
          error: reconciledError("the adapter invocation never closed and nothing runs it any more"),
        });
        continue;
      }
      const settled = deliveries.settled(row.messageId);
      if (settled !== undefined) {
        lineage.update(row.id, { status: settled.outcome, attempt: settled.attempt, finishedAt });
        fromLedger++;
      } else {
        lineage.update(row.id, {
          status: "failed",
          finishedAt,
          error: reconciledError(
            "no broker queue or handler holds this message any more; its final lineage write was lost",
          ),
        });
        failed++;
      }
    }
    await lineage.flush();
    logger.warn("closed lineage rows whose closing write was lost", {
      executionId,
      rows: rows.length,
      closedAsSettled: fromLedger,
      failed,
    });
    this.#idleSince = undefined;
    return rows.length > 0;
  }
}

function reconciledError(message: string) {
  return { class: LINEAGE_RECONCILED, message, retryable: false, fatal: false };
}

async function openRows(lineage: LineageProtocol, executionId: string): Promise<LineageRow[]> {
  const rows: LineageRow[] = [];
  for (const status of OPEN) {
    // Closing rows shrinks the set being paged, so read everything first.
    for (let offset = 0; ; offset += PAGE) {
      const page = await lineage.rows(executionId, { status, offset, limit: PAGE });
      rows.push(...page.items);
      if (page.items.length < PAGE) break;
    }
  }
  return rows;
}
