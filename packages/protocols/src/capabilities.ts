/**
 * What a provider's broker can do. The conformance suite reads these to choose test groups and
 * prints what it did not run and why. A capability describes a documented limit of the broker; it
 * never switches an assertion off.
 */
export interface ProviderCapabilities {
  /** Honours `priority` on publish when the subscription declares `maxPriority`. */
  readonly priorities: boolean;
  /** Shape of the delay between retry attempts. */
  readonly retryDelay: "exponential" | "fixed";
  /** Smallest delay the broker can schedule reliably, in ms. */
  readonly delayGranularityMs: number;
  /** Per-queue FIFO with a single active consumer when `ordering: "fifo"`. */
  readonly fifo: boolean;
  /** FIFO per message group (`groupBy` body field) with groups processed concurrently. */
  readonly messageGroups: boolean;
  /** Messages survive a restart of the process/broker. */
  readonly durable: boolean;
  /** Largest accepted encoded message (body + headers), in bytes. */
  readonly maxMessageBytes: number;
  /**
   * Ordered message groups keyed by a payload path or a header (`groupBy` / `groupByHeader`), held
   * across retries, and kept on one consumer when several processes consume the queue (the broker's
   * own mechanism: Artemis message groups, a RabbitMQ single-active-consumer queue, Pulsar
   * Key_Shared). Left out means unsupported: pipelines with `group_by` are rejected at validation.
   */
  readonly orderedGroups?: boolean;
  /**
   * The broker refuses to change a queue's priority levels in place (RabbitMQ's `x-max-priority`):
   * a changed `max_priority` needs the queue deleted first. Left out means it can change.
   */
  readonly immutablePriority?: boolean;
  /**
   * `admin.stats` counts what the broker holds for a destination whoever consumes it: waiting
   * messages, scheduled retries and the deliveries every consumer (of any process) holds
   * unacknowledged. A cluster takeover then needs to wait only for what a live server can have in
   * transit outside the broker (docs/deployment.md). Left out means the stats see waiting messages
   * and this process's own deliveries only (RabbitMQ over AMQP: another consumer's unacknowledged
   * deliveries and retry holding queues another process declared are not counted).
   */
  readonly brokerWideStats?: boolean;
}
