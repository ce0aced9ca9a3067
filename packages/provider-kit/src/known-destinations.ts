import type { DestinationInfo } from "@factflow/protocols";

/**
 * The destinations a provider instance has published to or subscribed to, with the subscriptions
 * of topics: what `admin.listDestinations()` reports on brokers that cannot list them themselves.
 * Bounded: beyond `limit` destinations the oldest are forgotten.
 */
export class KnownDestinations {
  readonly #known = new Map<string, { kind: "queue" | "topic"; subscriptions: Set<string> }>();

  constructor(private readonly limit = 10_000) {}

  /** Notes a use of `destination`; `subscription` counts for topics only. */
  remember(destination: string, kind: "queue" | "topic", subscription?: string): void {
    let entry = this.#known.get(destination);
    if (entry === undefined) {
      entry = { kind, subscriptions: new Set() };
      this.#known.set(destination, entry);
      if (this.#known.size > this.limit) {
        const oldest = this.#known.keys().next().value;
        if (oldest !== undefined) this.#known.delete(oldest);
      }
    }
    if (subscription !== undefined && kind === "topic") entry.subscriptions.add(subscription);
  }

  /** Every destination remembered, oldest first. */
  list(): DestinationInfo[] {
    return [...this.#known.entries()].map(([destination, entry]) =>
      entry.kind === "topic"
        ? { destination, kind: "topic", subscriptions: [...entry.subscriptions] }
        : { destination, kind: "queue" },
    );
  }
}
