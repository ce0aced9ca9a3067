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

export interface DeadLetterPage {
  readonly total: number;
  readonly offset: number;
  readonly items: readonly DeadLetter[];
}

/**
 * The queue admin contract every provider serves. Counts are exact: a redrive reports how many
 * messages it moved, and a browse never removes anything.
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
}

/**
 * Durability counters an operator reads to know nothing went missing. `superseded` counts
 * settlements withheld because the broker had reissued the delivery (not a loss); `lost` counts
 * messages the provider knows it could not preserve (should stay 0).
 */
export interface DurabilityCounters {
  published: number;
  /** Publishes the broker confirmed (receipt / publisher confirm / fsync). */
  confirmed: number;
  acked: number;
  retried: number;
  deadLettered: number;
  redelivered: number;
  superseded: number;
  lost: number;
}

export function emptyDurabilityCounters(): DurabilityCounters {
  return {
    published: 0,
    confirmed: 0,
    acked: 0,
    retried: 0,
    deadLettered: 0,
    redelivered: 0,
    superseded: 0,
    lost: 0,
  };
}
