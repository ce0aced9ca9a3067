import type { LineageProtocol, Logger, QueueProtocol, StorageProtocol } from "@factflow/protocols";
import type { DeliveryLedger } from "./delivery/delivery-ledger.js";
import type { Semaphore } from "./delivery/semaphore.js";

/** What every route processor of one execution shares with its orchestrator. */
export interface ExecutionRuntime {
  readonly executionId: string;
  /**
   * A random id of this orchestrator run (a restart, a resume or another server runs the same
   * execution under another one): it names the writer a non-durable message row was queued in.
   */
  readonly runId: string;
  /** The execution-scoped queue. */
  readonly queue: QueueProtocol;
  readonly lineage: LineageProtocol;
  readonly storage: StorageProtocol;
  readonly logger: Logger;
  /** `max_handlers`: handlers in flight across every route of the execution. */
  readonly globalSlots: Semaphore;
  /** Message ids running or settled for good in this process: recognises broker redeliveries. */
  readonly deliveries: DeliveryLedger;
  /**
   * Ids of the open message rows a resume re-published. Their originals may still come from the
   * broker unflagged (e.g. out of a retry delay), so admission checks their lineage row like a
   * redelivery's. Empty unless resumed with a re-seed.
   */
  readonly reseeded: ReadonlySet<string>;
  /** Fires when the execution stops (completed, failed, cancelled, shut down). */
  readonly signal: AbortSignal;
  /** Register every outbound message durably before its publish, not only fan-out children. */
  readonly strictLineage: boolean;
  /** Queued lineage writes above which a handler waits for a flush before publishing. */
  readonly maxLineageBacklog: number;
  /** The route whose inbound queue is `queue`. */
  routeForQueue(queue: string): string | undefined;
  /** A delivery started work: invalidates any completion check in progress. */
  onActivity(): void;
  /** A handler finished or parked in a batch: the execution may have become idle. */
  onMaybeIdle(): void;
  /** An adapter reported `metadata.fatal`: abort the execution. */
  onFatal(error: Error): void;
  /** A delivery was settled (acknowledged, failed or rejected). */
  onSettled(): void;
}
