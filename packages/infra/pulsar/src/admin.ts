import {
  type DeadLetter,
  type DeadLetterPage,
  type DeadLetterSource,
  type DeleteDestinationOptions,
  type DeleteDestinationResult,
  type DestinationInfo,
  type DestinationStats,
  Headers,
  ProviderError,
  type PurgeDestinationResult,
  type QueueAdminProtocol,
} from "@factflow/protocols";
import {
  deadLetterFromHeaders,
  deadLetterKey,
  PUBLISHED_AT_HEADER,
  redriveHeaders,
} from "@factflow/provider-kit";
import { copyPayload, decodeMessage, decodePayload } from "./codec.js";
import type { PulsarConfig } from "./config.js";
import { DEAD_LETTER_SUBSCRIPTION, type PulsarRoute, resolveDestination, routeOf } from "./naming.js";
import type { Producers } from "./producers.js";
import type { PeekedMessage, PulsarRest, SubscriptionFigures, TopicDeletion } from "./rest.js";
import type { Topics } from "./topics.js";
import type { ConsumerLink, IncomingMessage, PulsarTransport } from "./transport.js";

/**
 * The receive window of a search for one dead letter: the copies it passes over stay unacknowledged,
 * and the broker hands over no more than the window of those.
 */
const SEARCH_WINDOW = 1_000;
/** How long a dead-letter scan waits for the next message before it concludes there are no more. */
const SCAN_IDLE_MS = 3_000;
/** Pauses before asking again to delete a topic in use (a client closed just before may be detaching). */
const DETACH_RETRY_MS = [100, 200, 400] as const;
/** How long an admin change waits for the broker's backlog figure to show it. */
const SETTLE_WAIT_MS = 10_000;
/** Peeks in flight at once while a count or a browse reads the dead-letter subscription. */
export const PEEK_WINDOW = 16;
/**
 * Dead letters a redrive sends together before it acknowledges them, and the receive window of its
 * consumer: the most copies it holds at once.
 */
export const REDRIVE_BATCH = 100;

let readProbe: ((copy: object) => void) | undefined;

/**
 * Calls `probe` with every dead-letter copy the admin reads from the broker (a peeked message or a
 * received one; undefined stops it). Lets a test check how many copies stay reachable while a
 * dead-letter topic is read.
 */
export function observeDeadLetterReads(probe: ((copy: object) => void) | undefined): void {
  readProbe = probe;
}

/** What the admin needs from its provider. */
export interface AdminDeps {
  readonly config: PulsarConfig;
  readonly rest: PulsarRest;
  readonly transport: PulsarTransport;
  readonly producers: Producers;
  readonly topics: Topics;
  /** Every destination this provider has used, with the subscriptions of topics. */
  readonly destinations: () => readonly DestinationInfo[];
  /** Deliveries this process holds unsettled for a route (received, running or waiting). */
  readonly inFlight: (destination: string, subscription: string | undefined) => number;
}

function invalidSource(message: string): ProviderError {
  return new ProviderError("pulsar", "invalid-input", message, {
    code: "invalid_argument",
    retryable: false,
  });
}

/** The route an admin call addresses: a queue, or one subscription of a topic. */
function routeFor(source: DeadLetterSource): PulsarRoute {
  const target = resolveDestination(source.destination);
  if (target.kind === "topic") {
    if (source.subscription === undefined || source.subscription === "") {
      throw invalidSource(
        `${source.destination} is a topic: its dead letters and figures are kept per subscription, so pass { destination, subscription }`,
      );
    }
    return routeOf(source.destination, source.subscription);
  }
  return routeOf(source.destination, source.subscription ?? "admin");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Queue admin over Pulsar's admin REST API: stats from topic stats, dead-letter browse with peek
 * (nothing is removed), and discard / redrive through a short-lived consumer on the dead-letter
 * topic's retained subscription, acknowledging exactly the messages it moved or dropped.
 *
 * A dead letter stored twice (its copy sent again after the broker's answer was lost in a connection
 * cut) counts, lists and redrives once: the count and the browse peek every stored copy and keep the
 * first of each identity (by `deadLetterKey`); redrives and discards read the subscription and
 * acknowledge the later copies without republishing them, so they leave the broker.
 *
 * Memory does not grow with the dead-letter topic's bodies: a count or a browse peeks
 * {@link PEEK_WINDOW} copies at a time and keeps only each letter's identity (its message id and
 * publish time, tens of bytes) and, for a browse, the page asked for; a redrive receives through a
 * window of {@link REDRIVE_BATCH} copies, sends them, waits for the broker's answers and then
 * acknowledges them, batch by batch, keeping the identities of the letters it moved. A count or a
 * browse costs one REST peek per stored copy.
 */
export class PulsarAdmin implements QueueAdminProtocol {
  constructor(private readonly deps: AdminDeps) {}

  async listDestinations(): Promise<readonly DestinationInfo[]> {
    return this.deps.destinations();
  }

  private async backlogOf(topic: string, subscription: string): Promise<SubscriptionFigures | undefined> {
    return (await this.deps.rest.subscriptions(topic))?.get(subscription);
  }

  /** Copies stored on the dead-letter subscription (a dead letter stored twice counts twice). */
  private async deadLetterCount(route: PulsarRoute): Promise<number> {
    return (await this.backlogOf(route.deadLetterTopic, DEAD_LETTER_SUBSCRIPTION))?.backlog ?? 0;
  }

  /**
   * Peeks the stored copies in order, {@link PEEK_WINDOW} at a time, and hands the first copy of each
   * dead letter to `visit` with its position among the letters; nothing is removed, and nothing is
   * kept but the identities seen and what `visit` keeps. Answers the number of dead letters.
   */
  private async eachDeadLetter(
    route: PulsarRoute,
    visit: (peeked: PeekedMessage, index: number) => void,
  ): Promise<number> {
    const stored = await this.deadLetterCount(route);
    const seen = new Set<string>();
    const inFlight: Promise<PeekedMessage | undefined>[] = [];
    let position = 1;
    const fill = () => {
      while (inFlight.length < PEEK_WINDOW && position <= stored) {
        const peek = this.deps.rest.peek(route.deadLetterTopic, DEAD_LETTER_SUBSCRIPTION, position++);
        // Awaited in order below; this only keeps a failure behind an earlier one from going unhandled.
        peek.catch(() => {});
        inFlight.push(peek);
      }
    };
    fill();
    for (let peek = inFlight.shift(); peek !== undefined; peek = inFlight.shift()) {
      const peeked = await peek;
      if (peeked === undefined) break;
      readProbe?.(peeked);
      const key = keyOf(peeked.payload, peeked.messageId);
      if (!seen.has(key)) {
        visit(peeked, seen.size);
        seen.add(key);
      }
      fill();
    }
    return seen.size;
  }

  async stats(source: DeadLetterSource): Promise<DestinationStats> {
    const route = routeFor(source);
    const [main, retry, dlqDepth] = await Promise.all([
      this.backlogOf(route.topic, route.pulsarSubscription),
      route.retryTopic === route.topic
        ? undefined
        : this.backlogOf(route.retryTopic, route.pulsarSubscription),
      this.eachDeadLetter(route, () => {}),
    ]);
    const inFlight = this.deps.inFlight(
      route.destination,
      route.kind === "topic" ? route.subscription : undefined,
    );
    const held = (main?.backlog ?? 0) + (retry?.backlog ?? 0);
    const stats: DestinationStats = {
      destination: route.destination,
      depth: Math.max(0, held - inFlight),
      consumers: main?.consumers ?? 0,
      inFlight,
      dlqDepth,
    };
    return route.kind === "topic" ? { ...stats, subscription: route.subscription } : stats;
  }

  async browseDeadLetters(
    source: DeadLetterSource,
    page: { offset: number; limit: number },
  ): Promise<DeadLetterPage> {
    const route = routeFor(source);
    const offset = Math.max(0, Math.floor(page.offset));
    const limit = Math.max(0, Math.floor(page.limit));
    const items: DeadLetter[] = [];
    const total = await this.eachDeadLetter(route, (peeked, index) => {
      if (index >= offset && index < offset + limit)
        items.push(toDeadLetter(peeked.payload, peeked.publishTime));
    });
    return { total, offset, items };
  }

  async redriveAll(source: DeadLetterSource): Promise<{ redriven: number }> {
    const route = routeFor(source);
    const before = await this.deadLetterCount(route);
    if (before === 0) return { redriven: 0 };
    const keys = new Set<string>();
    let redriven = 0;
    let acked = 0;
    let batch: IncomingMessage[] = [];
    // Sent together, answered, then acknowledged: a crash leaves at most this batch both redriven
    // and still dead-lettered.
    const flush = async (link: ConsumerLink) => {
      await Promise.all(batch.map((message) => this.redriveCopy(route, message)));
      for (const message of batch) link.ack(message.messageId);
      redriven += batch.length;
      acked += batch.length;
      batch = [];
    };
    await this.scan(
      route,
      before,
      REDRIVE_BATCH,
      async (message, link, more) => {
        const key = keyOf(message.payload, message.messageId);
        // A later copy of a dead letter already redriven (or in this batch) goes without a republish.
        if (keys.has(key)) {
          link.ack(message.messageId);
          acked += 1;
        } else {
          keys.add(key);
          batch.push(message);
        }
        // A batch goes once full, or when no more copies are waiting (the window may be smaller).
        if (batch.length >= REDRIVE_BATCH || !more) await flush(link);
        return acked + batch.length < before ? "continue" : "stop";
      },
      async (link) => {
        if (batch.length > 0) await flush(link);
      },
    );
    await this.waitForCount(route, before - acked);
    return { redriven };
  }

  async redriveOne(source: DeadLetterSource, messageId: string): Promise<{ redriven: boolean }> {
    const route = routeFor(source);
    const done = await this.actOnOne(route, messageId, (message) => this.redriveCopy(route, message));
    return { redriven: done };
  }

  async discardOne(source: DeadLetterSource, messageId: string): Promise<{ discarded: boolean }> {
    const route = routeFor(source);
    const done = await this.actOnOne(route, messageId, async () => {});
    return { discarded: done };
  }

  /**
   * Finds the first dead letter with `x-message-id` = `messageId`, runs `act` on it, then
   * acknowledges it, and the later copies of that dead letter too (read to the end for them).
   */
  private async actOnOne(
    route: PulsarRoute,
    messageId: string,
    act: (message: IncomingMessage) => Promise<void>,
  ): Promise<boolean> {
    const before = await this.deadLetterCount(route);
    if (before === 0) return false;
    let found: string | undefined;
    let acked = 0;
    await this.scan(route, before, SEARCH_WINDOW, async (message, link) => {
      const decoded = decodePayload(message.payload);
      if ("error" in decoded || decoded.headers[Headers.messageId] !== messageId) return "continue";
      const key = keyOf(message.payload, message.messageId);
      if (found === undefined) {
        await act(message);
        found = key;
      } else if (key !== found) return "continue";
      link.ack(message.messageId);
      acked += 1;
      return "continue";
    });
    if (found !== undefined) await this.waitForCount(route, before - acked);
    return found !== undefined;
  }

  /** Publishes a dead letter back where its subscription consumes, with a fresh attempt budget. */
  private async redriveCopy(route: PulsarRoute, message: IncomingMessage): Promise<void> {
    const decoded = decodePayload(message.payload);
    const payload =
      "error" in decoded
        ? message.payload
        : copyPayload(decoded.headers, decoded.body, (h) => redriveHeaders(h));
    if (route.kind === "queue") await this.deps.topics.ensureQueue(route.topic);
    await this.deps.producers.send(route.retryTopic, { payload });
  }

  /**
   * Reads the dead letters of `route` through a consumer on the retained subscription, up to
   * `expected` messages, handing each to `visit`; stops when `visit` says so, when `expected` were
   * seen, or when no message came for a while. Whatever was not acknowledged goes back when the
   * consumer closes.
   */
  private async scan(
    route: PulsarRoute,
    expected: number,
    window: number,
    visit: (message: IncomingMessage, link: ConsumerLink, more: boolean) => Promise<"continue" | "stop">,
    finish?: (link: ConsumerLink) => Promise<void>,
  ): Promise<void> {
    const link = await this.deps.transport.openConsumer(route.deadLetterTopic, DEAD_LETTER_SUBSCRIPTION, {
      subscriptionType: "Shared",
      // The broker hands over at most this many copies not yet acknowledged.
      receiverQueueSize: Math.min(Math.max(expected, 1), window),
      negativeAckRedeliveryDelayMs: this.deps.config.negativeAckRedeliveryDelayMs,
    });
    const queue: IncomingMessage[] = [];
    let wake: (() => void) | undefined;
    link.onMessage((message) => {
      queue.push(message);
      wake?.();
    });
    link.onClose(() => wake?.());
    try {
      link.permit(expected);
      for (let seen = 0; seen < expected; seen++) {
        if (queue.length === 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, SCAN_IDLE_MS);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
        }
        const message = queue.shift();
        if (message === undefined) {
          if (link.closed) {
            throw new ProviderError(
              "pulsar",
              "connection",
              `the connection to dead-letter topic "${route.deadLetterTopic}" closed during the scan; try again`,
            );
          }
          break;
        }
        readProbe?.(message);
        if ((await visit(message, link, queue.length > 0)) === "stop") break;
      }
      await finish?.(link);
    } finally {
      // Let the acknowledgements reach the broker before the consumer goes.
      await sleep(50);
      link.close();
    }
  }

  /** Waits (bounded) until the broker's dead-letter count shows a change, so the next call sees it. */
  private async waitForCount(route: PulsarRoute, want: number): Promise<void> {
    const deadline = Date.now() + SETTLE_WAIT_MS;
    while (Date.now() < deadline) {
      if ((await this.deadLetterCount(route)) <= want) return;
      await sleep(50);
    }
  }

  /**
   * Clears the backlog of the route's subscription (and of a topic subscription's retry topic) with
   * the admin API's skip-all. The count is the backlog read just before, minus what consumers hold:
   * the broker's unacknowledged count, or what this process holds unsettled when that is more (the
   * broker counts nothing on `Failover` subscriptions). A redriven copy waiting on the retry topic
   * goes too. Deliveries a consumer holds are still handled and settled, but the broker no longer
   * keeps them (see docs/providers/pulsar.md).
   */
  async purgeDestination(source: DeadLetterSource): Promise<PurgeDestinationResult> {
    const route = routeFor(source);
    const { rest } = this.deps;
    const main = await this.backlogOf(route.topic, route.pulsarSubscription);
    if (main === undefined) return { purged: 0, reason: `${describe(route)} does not exist` };
    const retry =
      route.retryTopic === route.topic
        ? undefined
        : await this.backlogOf(route.retryTopic, route.pulsarSubscription);
    const inFlight = this.deps.inFlight(
      route.destination,
      route.kind === "topic" ? route.subscription : undefined,
    );
    const held = Math.max(main.unacked + (retry?.unacked ?? 0), inFlight);
    const backlog = main.backlog + (retry?.backlog ?? 0);
    await rest.skipAll(route.topic, route.pulsarSubscription);
    if (retry !== undefined) await rest.skipAll(route.retryTopic, route.pulsarSubscription);
    return { purged: Math.max(0, backlog - held) };
  }

  /**
   * Deletes a topic no client is connected to (`PulsarRest.deleteUnusedTopic`), never forcing the
   * producers and consumers of other processes off: the broker's WebSocket proxy would reconnect
   * them, and one closed during that reconnect makes the proxy drop its shared connection to the
   * broker, which hands every delivery its consumers hold to other consumers again, with a
   * redelivery count of 0 (docs/providers/pulsar.md, "Deleting destinations"). The producer this
   * process closed just before may still be detaching at the broker, so an in-use answer is asked
   * again for a short while.
   */
  private async deleteUnused(topic: string): Promise<TopicDeletion> {
    let result = await this.deps.rest.deleteUnusedTopic(topic);
    for (const delayMs of DETACH_RETRY_MS) {
      if (result.outcome !== "in-use") break;
      await sleep(delayMs);
      result = await this.deps.rest.deleteUnusedTopic(topic);
    }
    return result;
  }

  async deleteDestination(
    source: DeadLetterSource,
    options: DeleteDestinationOptions = {},
  ): Promise<DeleteDestinationResult> {
    const route = routeFor(source);
    const { rest, producers, topics } = this.deps;
    const keepDeadLetters = options.keepDeadLetters ?? true;
    const subs = await rest.subscriptions(route.topic);
    const own = subs?.get(route.pulsarSubscription);
    let deleted = false;
    if (own === undefined) {
      if (keepDeadLetters) return { deleted: false, reason: `${describe(route)} does not exist` };
    } else {
      // This process's producer goes first, whatever the answer: the topic is deleted only once no
      // client uses it, so a producer kept after a refusal here would keep the other processes'
      // deletes (a cluster's other servers cleaning up the same execution) refused for good.
      if (route.kind === "queue") {
        await producers.forget(route.topic);
        topics.forget(route.topic);
      } else await producers.forget(route.retryTopic);
      if (own.consumers > 0) {
        return {
          deleted: false,
          reason: `${own.consumers} consumer(s) still attached to ${describe(route)}`,
        };
      }
      const retry =
        route.retryTopic === route.topic
          ? undefined
          : (await rest.subscriptions(route.retryTopic))?.get(route.pulsarSubscription);
      const waiting = own.backlog + (retry?.backlog ?? 0);
      if (options.ifEmpty === true && waiting > 0) {
        return {
          deleted: false,
          reason: `${describe(route)} is not empty: ${waiting} message(s) waiting or scheduled`,
        };
      }
      if (route.kind === "queue") {
        const result = await this.deleteUnused(route.topic);
        if (result.outcome === "in-use") {
          return { deleted: false, reason: `${describe(route)} is still in use: ${result.reason}` };
        }
        deleted = result.outcome === "deleted";
      } else {
        deleted = await rest.deleteSubscription(route.topic, route.pulsarSubscription);
        // Other processes of the same subscription may still publish retries: then it stays.
        await this.deleteUnused(route.retryTopic);
      }
    }
    const letters = await this.deadLetterCount(route);
    if (keepDeadLetters && letters > 0) {
      return { deleted, deadLettersKept: letters, reason: `dead letters kept: ${letters}` };
    }
    await producers.forget(route.deadLetterTopic);
    topics.forget(route.deadLetterTopic);
    const dropped = await this.deleteUnused(route.deadLetterTopic);
    if (dropped.outcome === "in-use") {
      return {
        deleted,
        ...(letters > 0 ? { deadLettersKept: letters } : {}),
        reason: `the dead-letter topic of ${describe(route)} is still in use: ${dropped.reason}`,
      };
    }
    const droppedLetters = dropped.outcome === "deleted";
    if (!deleted && droppedLetters) {
      return {
        deleted: true,
        deadLettersKept: 0,
        reason: `${describe(route)} was already gone; its dead letters were removed`,
      };
    }
    return deleted
      ? { deleted: true, deadLettersKept: 0 }
      : { deleted: false, reason: `${describe(route)} does not exist` };
  }
}

function describe(route: PulsarRoute): string {
  return route.kind === "queue"
    ? `queue ${route.destination}`
    : `subscription "${route.subscription}" of topic ${route.destination}`;
}

/** The identity of a stored dead letter (`deadLetterKey`); an undecodable one is named by the broker's id. */
function keyOf(payload: string | Buffer, brokerId: string): string {
  const decoded = decodePayload(payload);
  if ("error" in decoded) return deadLetterKey({ id: `pulsar:${brokerId}` });
  return deadLetterKey({
    id: decoded.headers[Headers.messageId] ?? `pulsar:${brokerId}`,
    publishedAt: decoded.headers[PUBLISHED_AT_HEADER],
  });
}

/** A dead letter as the admin API reports it. */
function toDeadLetter(payload: Buffer, publishTime: string | undefined): DeadLetter {
  const decoded = decodeMessage(payload, publishTime);
  if ("error" in decoded) {
    return {
      message: {
        id: "",
        body: payload.toString("utf8"),
        headers: {},
        correlationId: "",
        publishedAt: publishTime ?? new Date(0).toISOString(),
      },
      reason: "rejected",
      attempts: 1,
      deadLetteredAt: publishTime ?? new Date(0).toISOString(),
      lastError: decoded.error,
    };
  }
  return deadLetterFromHeaders(decoded.envelope, decoded.envelope.headers, {
    reason: "rejected",
    deadLetteredAt: publishTime ?? new Date(0).toISOString(),
  });
}
