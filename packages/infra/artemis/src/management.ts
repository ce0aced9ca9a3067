import { randomUUID } from "node:crypto";
import { ProviderError } from "@factflow/protocols";
import type { IMessage } from "@stomp/stompjs";
import type { ArtemisConfig } from "./config.js";
import type { LinkSubscription, StompLink } from "./stomp-link.js";

/** Artemis' management address: a message sent here invokes an operation on a broker resource. */
const MANAGEMENT_ADDRESS = "activemq.management";
/** Artemis answers `AMQ229067: Cannot find resource` for a queue that does not exist (yet). */
const NOT_FOUND = /AMQ229067|Cannot find resource/;
/** Artemis answers `AMQ229017: Queue <name> does not exist` to destroying a missing queue. */
const QUEUE_MISSING = /AMQ229017|does not exist/;

interface PendingCall {
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** What `queueFigures` reports about one queue. */
export interface QueueFigures {
  readonly exists: boolean;
  /** Every message of the queue: waiting, scheduled and delivering. */
  readonly messageCount: number;
  /** Deliveries the queue counts as handed to a consumer and not yet acknowledged. */
  readonly deliveringCount: number;
  readonly consumerCount: number;
  /**
   * Deliveries its live consumers actually hold (the sum of their `messagesInTransit`). Normally
   * equal to `deliveringCount`; Artemis 2.40 can leave a delivery of a consumer whose connection
   * died (kill -9 under load) counted as delivering while no consumer holds it, and never
   * redelivered. Such a stranded delivery is in `deliveringCount` but
   * not here.
   */
  readonly heldCount: number;
}

/** A management call on a resource that does not exist, e.g. the stats of a queue nobody used yet. */
export class ResourceNotFound extends Error {
  override readonly name = "ResourceNotFound";
}

/**
 * Invokes Artemis management operations over the STOMP connection: a SEND to `activemq.management`
 * with `_AMQ_ResourceName` / `_AMQ_OperationName` (or `_AMQ_Attribute`), a JSON array of arguments
 * as a text body, and a `reply-to` queue the answer comes back on, matched by `correlation-id`.
 * No HTTP port (Jolokia) is needed; the user needs the `manage` permission.
 */
export class ManagementClient {
  private readonly calls = new Map<string, PendingCall>();
  private readonly replyQueue = `factflow.admin.reply.${randomUUID()}`;
  private subscription: Promise<LinkSubscription> | undefined;
  private subscribedOn = 0;

  constructor(
    private readonly link: StompLink,
    private readonly config: ArtemisConfig,
  ) {
    link.onConnected(() => {
      this.subscription = undefined;
    });
  }

  /** Invokes `operation` on `resource` (e.g. `queue.orders`, `broker`) and returns its decoded result. */
  async invoke(resource: string, operation: string, args: readonly unknown[] = []): Promise<unknown> {
    return this.call(
      resource,
      { _AMQ_OperationName: operation },
      JSON.stringify(args),
      `${operation} on ${resource}`,
    );
  }

  /** Reads attribute `attribute` of `resource`. */
  async read(resource: string, attribute: string): Promise<unknown> {
    return this.call(resource, { _AMQ_Attribute: attribute }, "[]", `read ${attribute} of ${resource}`);
  }

  /**
   * Waits until `queue` has taken in every message the broker has confirmed to a sender. Artemis
   * sends a SEND's RECEIPT before the queue's executor has added the message, so a count taken right
   * after can miss it (measured on 2.40: 12 of 2,000 `listQueues` counts); `flushExecutor` runs that
   * executor's pending work first (0 of 2,000). A queue that does not exist has nothing to flush.
   */
  async flushQueue(queue: string): Promise<void> {
    try {
      await this.invoke(`queue.${queue}`, "flushExecutor", []);
    } catch (error) {
      if (!(error instanceof ResourceNotFound)) throw error;
    }
  }

  /**
   * Message, delivering and consumer counts of one queue (`listQueues` by name); zeros and
   * `exists: false` for a queue that does not exist (yet). `heldCount` is what the queue's consumers
   * really hold (see {@link QueueFigures}).
   */
  async queueFigures(queue: string): Promise<QueueFigures> {
    const filter = JSON.stringify({ field: "name", operation: "EQUALS", value: queue });
    const answer = await this.invoke("broker", "listQueues", [filter, 1, 10]);
    let rows: unknown[] = [];
    try {
      const parsed = JSON.parse(String(answer)) as { data?: unknown };
      rows = Array.isArray(parsed.data) ? parsed.data : [];
    } catch {
      throw new ProviderError("artemis", "unknown", `admin: unreadable listQueues answer for "${queue}"`);
    }
    const row = rows.find((r) => (r as { name?: unknown }).name === queue) as
      | Record<string, unknown>
      | undefined;
    const deliveringCount = toNumber(row?.deliveringCount);
    return {
      exists: row !== undefined,
      messageCount: toNumber(row?.messageCount),
      deliveringCount,
      consumerCount: toNumber(row?.consumerCount),
      heldCount: deliveringCount === 0 ? 0 : await this.heldByConsumers(queue),
    };
  }

  /** Deliveries the consumers of `queue` hold unacknowledged right now (their `messagesInTransit`). */
  private async heldByConsumers(queue: string): Promise<number> {
    let consumers: unknown;
    try {
      consumers = JSON.parse(String(await this.invoke(`queue.${queue}`, "listConsumersAsJSON")));
    } catch (error) {
      // Gone between the two calls: nothing is held.
      if (error instanceof ResourceNotFound) return 0;
      if (error instanceof SyntaxError)
        throw new ProviderError(
          "artemis",
          "unknown",
          `admin: unreadable listConsumersAsJSON answer for "${queue}"`,
        );
      throw error;
    }
    if (!Array.isArray(consumers)) return 0;
    let held = 0;
    for (const consumer of consumers)
      held += toNumber((consumer as { messagesInTransit?: unknown }).messagesInTransit);
    return held;
  }

  /**
   * Makes `queue` (on `address`) an exclusive queue, creating it when missing: Artemis then feeds a
   * single consumer at a time (the others stand by), which is what FIFO across servers needs.
   * Queue attributes cannot be set from a STOMP SUBSCRIBE, hence management.
   */
  async ensureExclusive(queue: string, address: string, routing: "ANYCAST" | "MULTICAST"): Promise<void> {
    const config = { name: queue, address, "routing-type": routing, exclusive: true, durable: true };
    await this.invoke("broker", "createQueue", [
      JSON.stringify({ ...config, "auto-create-address": true }),
      true,
    ]);
    await this.invoke("broker", "updateQueue", [JSON.stringify(config)]);
  }

  /**
   * Destroys `queue` without removing consumers (Artemis refuses while any are attached), and its
   * address too when `deleteAddress` and no other queue is bound to it. Resolves false when the
   * queue did not exist.
   */
  async destroyQueue(queue: string, deleteAddress: boolean): Promise<boolean> {
    try {
      await this.invoke("broker", "destroyQueue", [queue, false, deleteAddress]);
      return true;
    } catch (error) {
      if (error instanceof ResourceNotFound || QUEUE_MISSING.test((error as Error).message)) return false;
      throw error;
    }
  }

  /**
   * Deletes this client's reply queue (the provider is closing). Sent without `reply-to`: the
   * answer would go to the queue being deleted. Best effort; a leftover queue is empty and harmless.
   */
  async dispose(): Promise<void> {
    const subscription = this.subscription;
    this.subscription = undefined;
    if (subscription === undefined || !this.link.isConnected) return;
    try {
      await (await subscription).unsubscribe();
      await this.link.send(
        MANAGEMENT_ADDRESS,
        { _AMQ_ResourceName: "broker", _AMQ_OperationName: "destroyQueue" },
        JSON.stringify([this.replyQueue, true, true]),
        "admin: delete the reply queue",
        { rawText: true },
      );
    } catch {
      // The connection is going away anyway.
    }
  }

  /** Rejects every call in flight (the provider is closing). */
  abandon(): void {
    for (const [id, call] of [...this.calls]) {
      this.calls.delete(id);
      clearTimeout(call.timer);
      call.reject(new ProviderError("artemis", "closed", "admin call abandoned: the provider is closed"));
    }
  }

  private async call(
    resource: string,
    selector: Record<string, string>,
    body: string,
    what: string,
  ): Promise<unknown> {
    const timeoutMs = this.config.adminTimeoutMs;
    await this.link.whenConnected(timeoutMs, `admin: ${what}`);
    await this.ensureReplySubscription();
    const correlationId = randomUUID();
    const answer = new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.calls.delete(correlationId);
        reject(
          new ProviderError(
            "artemis",
            "timeout",
            `admin: ${what}: no management reply within ${timeoutMs} ms; check the user has the "manage" permission`,
          ),
        );
      }, timeoutMs);
      this.calls.set(correlationId, { resolve, reject, timer });
    });
    // The reply can come before the SEND's receipt: a rejection then must not count as unhandled
    // while `send` is still awaited (the caller gets it through `return answer`).
    answer.catch(() => undefined);
    try {
      // A text body without content-length is what the management service parses as its arguments.
      await this.link.send(
        MANAGEMENT_ADDRESS,
        {
          _AMQ_ResourceName: resource,
          ...selector,
          "reply-to": this.replyQueue,
          "correlation-id": correlationId,
        },
        body,
        `admin: ${what}`,
        { rawText: true },
      );
    } catch (error) {
      const call = this.calls.get(correlationId);
      if (call !== undefined) {
        this.calls.delete(correlationId);
        clearTimeout(call.timer);
      }
      throw error;
    }
    return answer;
  }

  private async ensureReplySubscription(): Promise<void> {
    if (this.subscription === undefined || this.subscribedOn !== this.link.generation) {
      this.subscribedOn = this.link.generation;
      this.subscription = this.link.subscribe(
        this.replyQueue,
        { "subscription-type": "ANYCAST" },
        (message) => this.handleReply(message),
      );
      this.subscription.catch(() => {
        this.subscription = undefined;
      });
    }
    await this.subscription;
  }

  private handleReply(message: IMessage): void {
    const id = message.headers["correlation-id"];
    const call = id === undefined ? undefined : this.calls.get(id);
    if (id === undefined || call === undefined) return;
    this.calls.delete(id);
    clearTimeout(call.timer);
    let decoded: unknown;
    try {
      decoded = JSON.parse(message.body);
    } catch {
      decoded = [message.body];
    }
    const value = Array.isArray(decoded) ? decoded[0] : decoded;
    if (message.headers._AMQ_OperationSucceeded === "true") {
      call.resolve(value);
      return;
    }
    const text = String(value);
    if (NOT_FOUND.test(text)) {
      call.reject(new ResourceNotFound(text));
      return;
    }
    call.reject(new ProviderError("artemis", "rejected", `admin: management operation failed: ${text}`));
  }
}

function toNumber(value: unknown): number {
  const n = Number(value);
  return Number.isFinite(n) ? n : 0;
}
