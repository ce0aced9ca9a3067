import type { Logger } from "@factflow/protocols";
import type { PulsarConfig } from "./config.js";
import type { ConsumerLink, IncomingMessage, PulsarSubscriptionType, PulsarTransport } from "./transport.js";

/** What a source needs to open its consumer links. */
export interface SourceDeps {
  readonly config: PulsarConfig;
  readonly transport: PulsarTransport;
  readonly logger: Logger;
  readonly destination: string;
  readonly subscriptionType: PulsarSubscriptionType;
  readonly receiverQueueSize: number;
  /** True once the subscription stops: no more links are opened. */
  readonly stopped: () => boolean;
  /** A message arrived on `link`. */
  readonly received: (message: IncomingMessage, link: ConsumerLink, source: Source) => void;
  /** `link` dropped: the broker has its unacknowledged messages back. */
  readonly detached: (link: ConsumerLink) => void;
}

/**
 * One topic + Pulsar subscription a subscription consumes (the destination's own, and for a topic
 * subscription also its retry topic) over one consumer link, opened again with backoff whenever it
 * drops. The broker's WebSocket handler sends at most `receiverQueueSize` messages that are neither
 * acknowledged nor negatively acknowledged: that is the flow control.
 */
export class Source {
  link: ConsumerLink | undefined;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: SourceDeps,
    readonly topic: string,
    readonly pulsarSubscription: string,
  ) {}

  /** Opens the link; resolves once the broker registered the consumer. */
  async attach(): Promise<void> {
    const { deps } = this;
    const link = await deps.transport.openConsumer(this.topic, this.pulsarSubscription, {
      subscriptionType: deps.subscriptionType,
      receiverQueueSize: deps.receiverQueueSize,
      negativeAckRedeliveryDelayMs: deps.config.negativeAckRedeliveryDelayMs,
    });
    if (deps.stopped()) {
      link.close();
      return;
    }
    this.link = link;
    link.onMessage((message) => deps.received(message, link, this));
    link.onClose((cause) => {
      if (this.link !== link) return;
      this.link = undefined;
      deps.detached(link);
      if (deps.stopped() || cause.kind === "local") return;
      deps.logger.warn("pulsar consumer connection lost; resubscribing", {
        destination: deps.destination,
        topic: this.topic,
      });
      this.scheduleReattach(deps.config.reconnectInitialDelayMs);
    });
    link.permit(deps.receiverQueueSize);
  }

  /** Whether `link` is this source's live link. */
  holds(link: ConsumerLink): boolean {
    return !link.closed && this.link === link;
  }

  private scheduleReattach(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.deps.stopped() || this.link !== undefined) return;
      this.attach().catch((error: unknown) => {
        this.deps.logger.warn("pulsar resubscribe failed; retrying", {
          destination: this.deps.destination,
          error: error instanceof Error ? error.message : String(error),
        });
        this.scheduleReattach(Math.min(delayMs * 2, this.deps.config.reconnectMaxDelayMs));
      });
    }, delayMs);
  }

  /** Stops reopening the link. */
  stopReattaching(): void {
    clearTimeout(this.timer);
  }

  /** Closes the link: the broker hands its unacknowledged messages out again. */
  close(): void {
    clearTimeout(this.timer);
    this.link?.close();
    this.link = undefined;
  }
}
