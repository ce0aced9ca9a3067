import type { DestinationInfo } from "@factflow/protocols";
import { LRUCache } from "lru-cache";

/**
 * The destinations a provider instance has published to or subscribed to, with the subscriptions
 * of topics: what `admin.listDestinations()` reports on brokers that cannot list them themselves.
 * Bounded: beyond `limit` destinations the oldest are forgotten.
 */
export class KnownDestinations {
  /**
   * Oldest forgotten first, in constant time: a Map's oldest key, taken with `keys().next()` after
   * many deletions, walks past every deleted slot first.
   */
  readonly #known: LRUCache<string, { kind: "queue" | "topic"; subscriptions: Set<string> }>;

  constructor(limit = 10_000) {
    this.#known = new LRUCache({ max: limit });
  }

  /** Notes a use of `destination`; `subscription` counts for topics only. */
  remember(destination: string, kind: "queue" | "topic", subscription?: string): void {
    let entry = this.#known.peek(destination);
    if (entry === undefined) {
      entry = { kind, subscriptions: new Set() };
      this.#known.set(destination, entry);
    }
    if (subscription !== undefined && kind === "topic") entry.subscriptions.add(subscription);
  }

  /** Every destination remembered, oldest first. */
  list(): DestinationInfo[] {
    const destinations: DestinationInfo[] = [];
    for (const destination of this.#known.rkeys()) {
      const entry = this.#known.peek(destination);
      if (entry === undefined) continue;
      destinations.push(
        entry.kind === "topic"
          ? { destination, kind: "topic", subscriptions: [...entry.subscriptions] }
          : { destination, kind: "queue" },
      );
    }
    return destinations;
  }
}
