import type { OutgoingMessage, ProducerLink, PulsarTransport } from "./transport.js";

/** Most producer connections kept open at once; the least recently used one is closed beyond it. */
const MAX_PRODUCERS = 256;

/**
 * One producer link per topic, opened on first use and reopened after it closed. Sends resolve with
 * the broker's message id (the receipt) and reject when the broker refuses, the link drops or the
 * timeout passes: a publish never resolves on a local write alone.
 */
export class Producers {
  private readonly links = new Map<string, Promise<ProducerLink>>();

  /**
   * @param onLost called with the topic when the broker drops a producer (the topic may have been
   * deleted, e.g. by another instance's `deleteDestination`), so what was prepared on it is redone.
   */
  constructor(
    private readonly transport: PulsarTransport,
    private readonly timeoutMs: number,
    private readonly onLost: (topic: string) => void = () => {},
  ) {}

  private link(topic: string): Promise<ProducerLink> {
    let link = this.links.get(topic);
    if (link !== undefined) {
      // Keep recently used topics at the end (LRU order).
      this.links.delete(topic);
      this.links.set(topic, link);
      return link;
    }
    link = this.transport.openProducer(topic).then((opened) => {
      opened.onClose((cause) => {
        if (this.links.get(topic) === link) this.links.delete(topic);
        if (cause.kind === "remote") this.onLost(topic);
      });
      return opened;
    });
    link.catch(() => {
      if (this.links.get(topic) === link) this.links.delete(topic);
    });
    this.links.set(topic, link);
    if (this.links.size > MAX_PRODUCERS) {
      const [oldest, evicted] = this.links.entries().next().value as [string, Promise<ProducerLink>];
      this.links.delete(oldest);
      void evicted.then((l) => l.close()).catch(() => {});
    }
    return link;
  }

  async send(topic: string, message: OutgoingMessage): Promise<string> {
    let link = await this.link(topic);
    if (link.closed) {
      this.links.delete(topic);
      link = await this.link(topic);
    }
    return link.send(message, this.timeoutMs);
  }

  /** Closes the producer of `topic` (before deleting the topic, so it is not recreated by a reconnect). */
  async forget(topic: string): Promise<void> {
    const link = this.links.get(topic);
    this.links.delete(topic);
    if (link !== undefined) await link.then((l) => l.close()).catch(() => {});
  }

  closeAll(): void {
    for (const link of this.links.values()) void link.then((l) => l.close()).catch(() => {});
    this.links.clear();
  }
}
