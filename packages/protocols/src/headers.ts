/**
 * Header names Factflow reads and writes on every broker. Header values are always strings.
 */
export const Headers = {
  /** 1-based delivery attempt, carried in the message and incremented on every retry republish. */
  deliveryAttempt: "x-delivery-attempt",
  /** Stable identity of a message across retries, redrives and redeliveries. */
  messageId: "x-message-id",
  /** Correlation id: the identity of one logical unit of work through a pipeline. */
  correlationId: "x-correlation-id",
  /** The execution that owns the message. */
  executionId: "x-execution-id",
  /** W3C trace context. */
  traceparent: "traceparent",
  /** Why a message was dead-lettered: `rejected`, `exhausted`, `incomplete` or `topic-failure`. */
  deadLetterReason: "x-dead-letter-reason",
  /** Free-text detail of the last failure, set on dead-lettered and retried copies. */
  lastError: "x-last-error",
  /** The destination a dead-lettered message came from. */
  originalDestination: "x-original-destination",
  /** The subscription a dead-lettered topic delivery failed in. */
  originalSubscription: "x-original-subscription",
  /** ISO-8601 time a message was dead-lettered. */
  deadLetteredAt: "x-dead-lettered-at",
  /** Priority, 0 (lowest) to 9 (highest). */
  priority: "x-priority",
  /** Lineage row id of the message's parent hop (set by the engine). */
  lineageParent: "x-lineage-parent",
} as const;

/** Reasons a message ends in a dead-letter destination. */
export type DeadLetterReason = "rejected" | "exhausted" | "incomplete" | "topic-failure";
