import type { DurabilityCounters } from "@factflow/protocols";

/**
 * A fresh set of durability counters, all 0. A provider keeps one per instance, resets it on
 * `connect()` and counts each event where `DurabilityCounters` (in `@factflow/protocols`) says, so
 * every provider counts the same way.
 */
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
