import { type DurabilityCounters, type JsonValue, type Logger, ProviderError } from "@factflow/protocols";
import {
  type DecodedDelivery,
  type HandBackCause,
  type SettlementCopy,
  type SubscriptionPort,
  SubscriptionRuntime,
  type UndecodableDelivery,
} from "@factflow/provider-kit";
import { decodeMessage, payloadText, toBase64 } from "./codec.js";
import type { PulsarConfig } from "./config.js";
import type { PulsarRoute } from "./naming.js";
import type { ConsumePlan } from "./ordered-plan.js";
import type { Producers } from "./producers.js";
import { Source } from "./source.js";
import type { Topics } from "./topics.js";
import type { ConsumerLink, IncomingMessage, PulsarTransport } from "./transport.js";

/** What a subscription needs from its provider. */
export interface SubscriptionDeps {
  readonly config: PulsarConfig;
  readonly transport: PulsarTransport;
  readonly producers: Producers;
  readonly topics: Topics;
  readonly counters: DurabilityCounters;
  readonly logger: Logger;
  readonly onStop: (subscription: PulsarSubscription) => void;
}

/** One message, the link it arrived on, and its body once decoded (for a retry or dead-letter copy). */
interface Pending {
  readonly message: IncomingMessage;
  readonly link: ConsumerLink;
  readonly source: Source;
  body?: JsonValue;
}

/**
 * A consumer of one queue (the shared subscription `factflow` of its topic) or of one topic
 * subscription: the Pulsar port of the kit's `SubscriptionRuntime`, which runs the handlers and
 * decides and reports every settlement. A delivery is settled only on the link it arrived on: once
 * that link dropped, the broker hands the message out again (`isCurrent` false).
 */
export class PulsarSubscription implements SubscriptionPort<Pending> {
  readonly runtime: SubscriptionRuntime<Pending>;
  private readonly sources: Source[];
  private deliver: ((pending: Pending, redelivered: boolean) => void) | undefined;
  private stopped = false;

  constructor(
    private readonly deps: SubscriptionDeps,
    readonly route: PulsarRoute,
    settings: ConsumePlan,
  ) {
    this.runtime = new SubscriptionRuntime({
      provider: "pulsar",
      destination: route.destination,
      handler: settings.handler,
      options: settings.options,
      port: this,
      counters: deps.counters,
      logger: deps.logger,
      onStop: () => deps.onStop(this),
    });
    const source = (topic: string) =>
      new Source(
        {
          config: deps.config,
          transport: deps.transport,
          logger: deps.logger,
          destination: route.destination,
          subscriptionType: settings.subscriptionType,
          receiverQueueSize: this.runtime.prefetch,
          stopped: () => this.stopped,
          received: (message, link, from) =>
            this.deliver?.({ message, link, source: from }, message.redeliveryCount > 0),
          // Waiting deliveries of a dropped link are the broker's again: forget them unrun.
          detached: () => this.runtime.dropStale(),
        },
        topic,
        route.pulsarSubscription,
      );
    this.sources = [source(route.topic)];
    if (route.retryTopic !== route.topic) this.sources.push(source(route.retryTopic));
  }

  get destination(): string {
    return this.route.destination;
  }

  get name(): string {
    return this.route.subscription;
  }

  /** Deliveries received and not settled yet (waiting, running, or waiting for their settlement). */
  inFlight(): number {
    return this.runtime.unsettled;
  }

  /** Connections of this subscription currently open. */
  openLinks(): number {
    return this.sources.filter((s) => s.link !== undefined && !s.link.closed).length;
  }

  stop(): Promise<void> {
    return this.runtime.unsubscribe();
  }

  async receive(deliver: (pending: Pending, redelivered: boolean) => void): Promise<void> {
    this.deliver = deliver;
    await Promise.all(this.sources.map((source) => source.attach()));
  }

  /**
   * The WebSocket consumer has no way to pause: closing it would hand back the deliveries still
   * settling. So the links stay open until `close`, and what arrives meanwhile is handed back.
   */
  async stopReceiving(): Promise<void> {
    this.stopped = true;
    for (const source of this.sources) source.stopReattaching();
  }

  decode(pending: Pending): DecodedDelivery | UndecodableDelivery {
    const decoded = decodeMessage(pending.message.payload, pending.message.publishTime);
    if ("error" in decoded) return { error: decoded.error, headers: {} };
    pending.body = decoded.body;
    return decoded;
  }

  isCurrent(pending: Pending): boolean {
    return pending.source.holds(pending.link);
  }

  ack(pending: Pending): boolean {
    pending.link.ack(pending.message.messageId);
    pending.link.permit(1);
    return true;
  }

  /**
   * A copy that was not confirmed: a negative ack, so the broker hands the message out again after
   * its fixed delay. On a stop, nothing: closing the link hands back everything it holds.
   */
  handBack(pending: Pending, cause: HandBackCause): boolean {
    if (cause !== "copy-failed") return true;
    pending.link.nack(pending.message.messageId);
    pending.link.permit(1);
    return true;
  }

  /** A retry goes to the retry topic (`deliverAfterMs`), a dead letter to the dead-letter topic. */
  async publishCopy(pending: Pending, copy: SettlementCopy): Promise<"confirmed"> {
    const { route } = this;
    const { producers, topics } = this.deps;
    // A message that was not a Factflow message is dead-lettered as it came.
    const payload =
      pending.body === undefined
        ? pending.message.payload
        : toBase64(payloadText(copy.headers, JSON.stringify(pending.body)));
    if (copy.kind === "retry") {
      await producers.send(route.retryTopic, { payload, deliverAfterMs: copy.verdict.delayMs });
      return "confirmed";
    }
    await topics.ensureDeadLetterTopic(route.deadLetterTopic);
    await producers.send(route.deadLetterTopic, { payload });
    return "confirmed";
  }

  classifyError(error: unknown, operation: string): ProviderError {
    if (error instanceof ProviderError) return error;
    const text = error instanceof Error ? error.message : String(error);
    return new ProviderError("pulsar", "unknown", `${operation} failed: ${text}`, { cause: error });
  }

  /** Closes the links: the broker hands out again whatever they still hold. */
  async close(): Promise<void> {
    for (const source of this.sources) source.close();
  }
}
