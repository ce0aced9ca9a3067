import { DEAD_LETTER_SUBSCRIPTION, QUEUE_SUBSCRIPTION } from "./naming.js";
import type { PulsarRest } from "./rest.js";

/** Most topics remembered as prepared; beyond it the memory starts over (the calls are idempotent). */
const MAX_REMEMBERED = 10_000;

/**
 * Makes sure the durable subscriptions that keep messages exist before anything is published: a
 * queue's shared subscription (so a message published before any consumer waits for one) and a
 * dead-letter topic's retained subscription (so dead letters stay until browsed away). Each is
 * created once per topic and process; concurrent callers share the call.
 */
export class Topics {
  private readonly prepared = new Map<string, Promise<void>>();

  constructor(private readonly rest: PulsarRest) {}

  private once(key: string, create: () => Promise<void>): Promise<void> {
    let work = this.prepared.get(key);
    if (work === undefined) {
      if (this.prepared.size >= MAX_REMEMBERED) this.prepared.clear();
      work = create();
      work.catch(() => {
        if (this.prepared.get(key) === work) this.prepared.delete(key);
      });
      this.prepared.set(key, work);
    }
    return work;
  }

  /** True once the queue's subscription is known to exist (the hot path skips the await). */
  isQueueReady(topic: string): boolean {
    return this.prepared.has(`${topic}\n${QUEUE_SUBSCRIPTION}`);
  }

  ensureQueue(topic: string): Promise<void> {
    return this.once(`${topic}\n${QUEUE_SUBSCRIPTION}`, () =>
      this.rest.createSubscription(topic, QUEUE_SUBSCRIPTION, "earliest"),
    );
  }

  ensureDeadLetterTopic(topic: string): Promise<void> {
    return this.once(`${topic}\n${DEAD_LETTER_SUBSCRIPTION}`, () =>
      this.rest.createSubscription(topic, DEAD_LETTER_SUBSCRIPTION, "earliest"),
    );
  }

  /** A topic subscription (or its retry topic's): created at the latest position, not remembered. */
  ensureTopicSubscription(topic: string, subscription: string): Promise<void> {
    return this.rest.createSubscription(topic, subscription, "latest");
  }

  /** Forgets what was prepared on `topic` (it was deleted). */
  forget(topic: string): void {
    for (const key of [...this.prepared.keys()]) if (key.startsWith(`${topic}\n`)) this.prepared.delete(key);
  }
}
