import type { MessageEnvelope } from "./envelope.js";

/** One queue or topic the provider knows about. */
export interface DestinationInfo {
  readonly destination: string;
  readonly kind: "queue" | "topic";
  /** Subscriptions of a topic. */
  readonly subscriptions?: readonly string[];
}

/** Point-in-time figures of a queue, or of one subscription of a topic. */
export interface DestinationStats {
  readonly destination: string;
  readonly subscription?: string;
  /** Messages waiting (ready or scheduled) and not yet delivered. */
  readonly depth: number;
  /** Consumers attached. */
  readonly consumers: number;
  /** Delivered, not yet settled. */
  readonly inFlight: number;
  /** Messages in the dead-letter destination. */
  readonly dlqDepth: number;
  /**
   * Deliveries the broker still counts as handed out while no live consumer holds them, so the
   * broker will not redeliver them on its own (Artemis 2.40 can strand a delivery of a consumer whose
   * connection died; see docs/deployment.md). A snapshot: a delivery acknowledged between the
   * provider's reads can show here once, so only a figure that stays above 0 across reads means
   * stranded. Absent when the provider cannot tell.
   */
  readonly stranded?: number;
}

/** A message sitting in a dead-letter destination. */
export interface DeadLetter {
  readonly message: MessageEnvelope;
  readonly reason: string;
  /** Attempts made before it was dead-lettered. */
  readonly attempts: number;
  readonly deadLetteredAt: string;
  readonly lastError?: string;
}

/** Addresses the dead letters of a queue, or of one subscription of a topic. */
export interface DeadLetterSource {
  readonly destination: string;
  /** Required for topics: dead letters are kept per subscription. */
  readonly subscription?: string;
}

/** Options of {@link QueueAdminProtocol.deleteDestination}. */
export interface DeleteDestinationOptions {
  /**
   * Refuse (`deleted: false`) while messages are waiting, scheduled for a retry or in flight.
   * @default false
   */
  readonly ifEmpty?: boolean;
  /**
   * Keep a dead-letter destination that still holds messages, so it stays browsable and
   * redrivable; an empty one is removed either way. `false` destroys dead letters too.
   * @default true
   */
  readonly keepDeadLetters?: boolean;
}

/** What {@link QueueAdminProtocol.deleteDestination} did. */
export interface DeleteDestinationResult {
  /** True when the queue (or subscription) was removed from the broker by this call. */
  readonly deleted: boolean;
  /**
   * Why nothing was deleted (unknown destination, messages waiting, consumers attached), or what
   * was deliberately left behind (`dead letters kept`). Meant for logs and operators.
   */
  readonly reason?: string;
  /** Dead letters left in place because `keepDeadLetters` was on (0 when none). */
  readonly deadLettersKept?: number;
}

/** What {@link QueueAdminProtocol.purgeDestination} did. */
export interface PurgeDestinationResult {
  /** Messages removed: those waiting for a consumer when the purge ran. */
  readonly purged: number;
  /** Why nothing was purged (the destination does not exist); absent when the purge ran. */
  readonly reason?: string;
}

export interface DeadLetterPage {
  readonly total: number;
  readonly offset: number;
  readonly items: readonly DeadLetter[];
}

/**
 * The queue admin contract every provider serves. Counts are exact: a redrive reports how many
 * messages it moved, and a browse never removes a dead letter. A dead letter the broker stored twice
 * (its copy's confirmation lost in a connection cut) is one dead letter: counted, listed, redriven and
 * discarded once, its surplus copy removed where the provider finds it. Its identity is its message
 * id and publish time (`deadLetterKey` in `@factflow/provider-kit`).
 *
 * Memory does not grow with the bodies held in a dead-letter destination: an operation that reads it
 * holds at most a page (browse) or a batch (redrive) of dead letters at once, plus, while it runs,
 * a small identity per dead letter where the provider must find surplus copies; each provider's doc
 * (`docs/providers/`) states its bound and what a read costs.
 */
export interface QueueAdminProtocol {
  listDestinations(): Promise<readonly DestinationInfo[]>;
  stats(source: DeadLetterSource): Promise<DestinationStats>;
  /** Browse without removing, oldest first. */
  browseDeadLetters(
    source: DeadLetterSource,
    page: { offset: number; limit: number },
  ): Promise<DeadLetterPage>;
  /** Move every dead letter back to its source with a fresh attempt budget. */
  redriveAll(source: DeadLetterSource): Promise<{ redriven: number }>;
  /** Move one dead letter (by message id) back to its source. */
  redriveOne(source: DeadLetterSource, messageId: string): Promise<{ redriven: boolean }>;
  /** Delete one dead letter for good. */
  discardOne(source: DeadLetterSource, messageId: string): Promise<{ discarded: boolean }>;
  /**
   * Removes a queue (or one subscription of a topic) from the broker together with the machinery
   * the provider keeps for it (retry holding queues, bindings), so short-lived destinations such
   * as execution-scoped queues do not accumulate. Dead letters are kept unless
   * `keepDeadLetters: false`: a dead-letter destination that holds messages survives (and stays
   * browsable and redrivable through this API), an empty one is removed too.
   *
   * Refusals are data, not errors: an unknown destination, consumers still attached, or (with
   * `ifEmpty`) messages waiting or in flight answer `{ deleted: false, reason }`. Throws only for
   * invalid input or when the broker cannot be reached.
   */
  deleteDestination(
    source: DeadLetterSource,
    options?: DeleteDestinationOptions,
  ): Promise<DeleteDestinationResult>;
  /**
   * Removes the messages waiting in a queue (or one subscription of a topic) and keeps the queue,
   * its consumers and its dead letters in place. Messages in flight (held by a consumer) and
   * retries already scheduled are not waiting, so they stay (except on Artemis and Pulsar, which
   * schedule retries in the queue itself: they go too; Pulsar's purge also stops the broker keeping
   * deliveries in flight, which their consumers still settle); an unknown destination answers
   * `{ purged: 0, reason }`. Providers that cannot purge in place leave it out.
   */
  purgeDestination?(source: DeadLetterSource): Promise<PurgeDestinationResult>;
}

/**
 * Durability counters an operator reads to know nothing went missing. They count events of one
 * provider instance since its `connect()`, the same way on every broker:
 *
 * - A caller's `publish()` counts once in `published` (and in `confirmed` once the broker has it),
 *   whatever number of topic subscriptions receive a copy.
 * - Copies a provider makes itself (a retry, a dead letter, a redelivery copy, an admin redrive) are
 *   never `published`/`confirmed`: a retry counts in `retried`, a dead letter in `deadLettered`.
 * - `acked`, `retried` and `deadLettered` count settlements: a delivery a handler finished with
 *   counts in at most one of them. `redelivered` and `superseded` count deliveries that were not
 *   settled by this delivery (handed out again, or settlement withheld).
 *
 * So on a fresh provider with no faults, `published` = `confirmed` = the caller's publishes, and
 * `acked` + `deadLettered` = the messages a handler has finished with.
 */
export interface DurabilityCounters {
  /** Caller `publish()` calls accepted for sending (valid input), once per call. */
  published: number;
  /**
   * Of `published`, those the broker confirmed (receipt / publisher confirm / fsync) before the
   * call resolved.
   */
  confirmed: number;
  /**
   * Deliveries settled because the handler returned ACKNOWLEDGED. Settling an original behind a
   * confirmed retry or dead-letter copy is not an ack: it counts in `retried` / `deadLettered`.
   */
  acked: number;
  /** FAILED deliveries whose retry copy (attempt + 1) was confirmed and their original settled. */
  retried: number;
  /**
   * Deliveries dead-lettered (REJECTED, retries exhausted, a failed topic delivery, an unreadable
   * message) whose dead-letter copy was confirmed and their original settled.
   */
  deadLettered: number;
  /**
   * Deliveries handed out again with the same attempt after an incomplete handler (a throw, a
   * non-settling status, a timeout), an abort (unsubscribe, close) or a lost connection: counted
   * where the provider sees it, when it hands the message back or when it receives a delivery the
   * broker flags as redelivered.
   */
  redelivered: number;
  /**
   * Settlements withheld because the broker had reissued the delivery meanwhile (connection or
   * consumer replaced); the reissued delivery is settled instead. Not a loss.
   */
  superseded: number;
  /** Messages the provider knows it could not preserve. Should stay 0. */
  lost: number;
}
