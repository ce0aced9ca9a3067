/** Every provider name whose broker behaviour the suite has written down. */
export type KnownProvider = "embedded" | "rabbitmq" | "artemis" | "pulsar" | "redis";

/**
 * What legitimately differs between brokers, as data. Assertions never switch off here; only the time a
 * broker is allowed to take for something changes.
 */
export interface ProviderExpectations {
  /** How long `admin.stats` may lag behind what happened (e.g. a management API refresh), in ms. */
  readonly statsLagMs: number;
  /** Extra time a retry may arrive after its computed delay (scheduler tick, TTL expiry at the head), in ms. */
  readonly retryDelaySlackMs: number;
  /** How long an incomplete delivery (internal status, throw, abort) may take to come back, in ms. */
  readonly redeliveryWithinMs: number;
  /** How long after a cut connection or a restart every message of the fault stream must be accounted for, in ms. */
  readonly recoveryWithinMs: number;
  /** One line on why these figures, printed with the summary. */
  readonly note: string;
}

/**
 * The written-down behaviour of every known provider. Adding a name to {@link KnownProvider} does not
 * compile until it has an entry here.
 */
export const PROVIDER_EXPECTATIONS: Readonly<Record<KnownProvider, ProviderExpectations>> = Object.freeze({
  embedded: {
    statsLagMs: 0,
    retryDelaySlackMs: 400,
    redeliveryWithinMs: 5_000,
    recoveryWithinMs: 20_000,
    note: "in-process scheduler: stats are exact at once, retries fire on a local timer",
  },
  rabbitmq: {
    statsLagMs: 2_000,
    retryDelaySlackMs: 800,
    redeliveryWithinMs: 10_000,
    recoveryWithinMs: 45_000,
    note: "retry delay is a TTL on <queue>.retry; unacked deliveries return when the channel closes",
  },
  artemis: {
    statsLagMs: 2_000,
    retryDelaySlackMs: 1_000,
    redeliveryWithinMs: 15_000,
    recoveryWithinMs: 60_000,
    note: "retries are scheduled with _AMQ_SCHED_DELIVERY; an unsettled delivery returns only when its consumer goes away",
  },
  pulsar: {
    statsLagMs: 5_000,
    retryDelaySlackMs: 1_500,
    redeliveryWithinMs: 15_000,
    recoveryWithinMs: 90_000,
    note: "retry copies are re-published with deliverAfterMs (delayed-delivery tick 100 ms); unsettled deliveries return when the consumer goes away; stats come from the admin REST API (acks are grouped for 100 ms)",
  },
  redis: {
    statsLagMs: 0,
    retryDelaySlackMs: 800,
    redeliveryWithinMs: 10_000,
    recoveryWithinMs: 45_000,
    note: "retries wait in a sorted set moved by a timer; a dead consumer's entries are reclaimed (XAUTOCLAIM) after the visibility timeout",
  },
});

/** True when `name` has an entry in {@link PROVIDER_EXPECTATIONS}. */
export function isKnownProvider(name: string): name is KnownProvider {
  return Object.hasOwn(PROVIDER_EXPECTATIONS, name);
}
