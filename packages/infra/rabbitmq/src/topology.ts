import { type Logger, ProviderError } from "@factflow/protocols";
import { settleWithin } from "@factflow/provider-kit";
import type { Channel } from "amqplib";
import { amqpReplyCode, classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager } from "./connection-manager.js";

/**
 * Most names a cache keeps. Execution-scoped queue names never repeat, so a long-running server
 * would otherwise remember every queue it ever touched; forgetting one only costs a re-declare.
 */
export const MAX_REMEMBERED_NAMES = 50_000;

/** Adds to an insertion-ordered set, evicting the oldest entries beyond the bound. */
export function rememberBounded<T>(
  collection: Set<T> | Map<T, unknown>,
  evictFrom: number = MAX_REMEMBERED_NAMES,
): void {
  if (collection.size <= evictFrom) return;
  let excess = collection.size - evictFrom;
  for (const key of collection.keys()) {
    if (excess-- <= 0) break;
    collection.delete(key);
  }
}

/** Arguments a source queue is declared with, derived from the subscription options. */
export interface QueueShape {
  readonly maxPriority?: number;
  readonly singleActiveConsumer?: boolean;
}

/** Depth and consumers of a queue, from a passive declare. */
export interface QueueCounts {
  readonly messageCount: number;
  readonly consumerCount: number;
}

function shapeArgs(shape: QueueShape): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  if (shape.maxPriority !== undefined) args["x-max-priority"] = shape.maxPriority;
  if (shape.singleActiveConsumer === true) args["x-single-active-consumer"] = true;
  return args;
}

/**
 * Declares and inspects broker objects on a dedicated channel, one operation at a time. A failed
 * declare (404, 406) closes only this throwaway channel, never a consumer's or the publisher's; it
 * is reopened for the next operation. Successful declares are remembered so hot paths skip them.
 */
export class Topology {
  private channel: { channel: Channel; generation: number; closed: boolean } | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  /** Queue name → JSON of its arguments (`"?"`: exists, arguments unknown). */
  private readonly queues = new Map<string, string>();
  private readonly exchanges = new Set<string>();
  private readonly bindings = new Set<string>();
  /** Holding queue name → time it was last declared (declaring renews its `x-expires` lease). */
  private readonly holding = new Map<string, number>();
  /** Every name this provider declared, for listing and for test clean-up. */
  readonly declaredQueues = new Set<string>();
  readonly declaredExchanges = new Set<string>();

  constructor(
    private readonly connection: ConnectionManager,
    private readonly config: RabbitMqConfig,
    private readonly logger: Logger,
  ) {}

  /** Forgets what was declared so the next use re-declares (after a reconnect the broker may have restarted). */
  forget(): void {
    this.queues.clear();
    this.exchanges.clear();
    this.bindings.clear();
    this.holding.clear();
  }

  /** Runs `op` on the topology channel, serialised, reopening the channel when needed. */
  run<T>(what: string, op: (channel: Channel) => Promise<T>): Promise<T> {
    const next = this.chain.then(async () => {
      const deadline = Date.now() + this.config.publishTimeoutMs;
      const live = await this.connection.waitForConnection(deadline, what);
      let current = this.channel;
      if (current === undefined || current.closed || current.generation !== live.generation) {
        const channel = await live.model.createChannel();
        const entry = { channel, generation: live.generation, closed: false };
        // The broker closes this channel on a failed declare; that is expected and reported by the caller.
        channel.on("error", () => {});
        channel.on("close", () => {
          entry.closed = true;
        });
        this.channel = entry;
        current = entry;
      }
      const entry = current;
      // A broker that stalls must not wedge every later declare queued behind this one: give up on
      // the operation and on the channel (the next operation opens a fresh one).
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => {
            entry.closed = true;
            void entry.channel.close().catch(() => {});
            reject(
              new ProviderError(
                "rabbitmq",
                "timeout",
                `${what} got no answer from the broker within ${this.config.publishTimeoutMs} ms; it may be overloaded or unreachable`,
                { retryable: true },
              ),
            );
          },
          Math.max(1, deadline - Date.now()),
        );
      });
      try {
        return await Promise.race([op(entry.channel), timeout]);
      } finally {
        clearTimeout(timer);
      }
    });
    this.chain = next.catch(() => {});
    return next;
  }

  /**
   * Declares a durable source queue with the given shape. A queue that already exists with other
   * arguments is reported as a `rejected` error naming both, and nothing else is disturbed.
   */
  async declareQueue(name: string, shape: QueueShape, describe: string): Promise<void> {
    const args = shapeArgs(shape);
    const key = JSON.stringify(args);
    if (this.queues.get(name) === key) return;
    try {
      await this.run(`declare queue "${name}"`, (ch) =>
        ch.assertQueue(name, { durable: true, arguments: args }),
      );
    } catch (error) {
      if (amqpReplyCode(error) === 406 && /x-max-priority/.test((error as Error).message)) {
        throw new ProviderError(
          "rabbitmq",
          "rejected",
          `queue "${name}" for "${describe}" already exists with different arguments than ${key}: RabbitMQ's x-max-priority (a queue's priority levels, max_priority) cannot change on a live queue (${(error as Error).message}). Keep the old max_priority, or let the queue drain and delete it (rabbitmqctl delete_queue ${name}) so it is re-created with the new one`,
          { cause: error },
        );
      }
      if (amqpReplyCode(error) === 406) {
        throw new ProviderError(
          "rabbitmq",
          "rejected",
          `queue "${name}" for "${describe}" already exists with different arguments than ${key} (${(error as Error).message}). Subscribe with the options it was created with, or delete the queue (rabbitmqctl delete_queue ${name}) to re-create it`,
          { cause: error },
        );
      }
      throw classifyAmqpError(error, `declaring queue "${name}" for "${describe}"`, this.config.url);
    }
    this.queues.set(name, key);
    this.declaredQueues.add(name);
    rememberBounded(this.queues);
    rememberBounded(this.declaredQueues);
  }

  /**
   * Makes sure a queue exists before publishing to it without imposing arguments: an existing
   * queue (possibly declared elsewhere with priorities or single-active-consumer) is left as is; a
   * missing one is declared plain and durable.
   */
  async ensureQueue(name: string, describe: string): Promise<void> {
    if (this.queues.has(name)) return;
    const counts = await this.check(name);
    if (counts === undefined) {
      try {
        await this.declareQueue(name, {}, describe);
        return;
      } catch (error) {
        // Someone declared it with other arguments in between: it exists, which is all we need.
        if (!(error instanceof ProviderError && error.reason === "rejected")) throw error;
      }
    }
    this.queues.set(name, "?");
    rememberBounded(this.queues);
  }

  /** Forgets one queue (it was found deleted), so its next use checks and declares it again. */
  forgetQueue(name: string): void {
    this.queues.delete(name);
    this.holding.delete(name);
    for (const key of this.bindings) if (key.startsWith(`${name}\u0000`)) this.bindings.delete(key);
  }

  /** Forgets one exchange (it was found deleted), and the bindings to it. */
  forgetExchange(name: string): void {
    this.exchanges.delete(name);
    for (const key of this.bindings) if (key.endsWith(`\u0000${name}`)) this.bindings.delete(key);
  }

  /** True when the queue is known to exist (declared or checked by this provider since the last reconnect). */
  hasQueue(name: string): boolean {
    return this.queues.has(name);
  }

  /** Declares a durable fanout exchange. */
  async declareExchange(name: string, describe: string): Promise<void> {
    if (this.exchanges.has(name)) return;
    try {
      await this.run(`declare exchange "${name}"`, (ch) =>
        ch.assertExchange(name, "fanout", { durable: true }),
      );
    } catch (error) {
      throw classifyAmqpError(
        error,
        `declaring fanout exchange "${name}" for "${describe}"`,
        this.config.url,
      );
    }
    this.exchanges.add(name);
    this.declaredExchanges.add(name);
    rememberBounded(this.exchanges);
    rememberBounded(this.declaredExchanges);
  }

  async bind(queue: string, exchange: string, describe: string): Promise<void> {
    const key = `${queue}\u0000${exchange}`;
    if (this.bindings.has(key)) return;
    try {
      await this.run(`bind "${queue}"`, (ch) => ch.bindQueue(queue, exchange, ""));
    } catch (error) {
      throw classifyAmqpError(
        error,
        `binding queue "${queue}" to exchange "${exchange}" for "${describe}"`,
        this.config.url,
      );
    }
    this.bindings.add(key);
    rememberBounded(this.bindings);
  }

  /**
   * Declares a holding queue whose messages dead-letter to `exchange`/`routingKey` after
   * `delayMs`. All its messages share one TTL, so expiry at the queue head is exact; it expires
   * itself `retryQueueIdleMs` after its delay when nobody re-declares it, and the declaration is
   * renewed well before that whenever it is used.
   */
  async declareHoldingQueue(
    name: string,
    delayMs: number,
    exchange: string,
    routingKey: string,
  ): Promise<void> {
    const last = this.holding.get(name);
    if (last !== undefined && Date.now() - last < this.config.retryQueueIdleMs / 2) return;
    const args = {
      "x-message-ttl": Math.round(delayMs),
      "x-dead-letter-exchange": exchange,
      "x-dead-letter-routing-key": routingKey,
      "x-expires": Math.round(delayMs) + this.config.retryQueueIdleMs,
    };
    try {
      await this.run(`declare holding queue "${name}"`, (ch) =>
        ch.assertQueue(name, { durable: true, arguments: args }),
      );
    } catch (error) {
      // Another process declared it with a different idle expiry. Its name fixes the delay and the
      // target, which is all that matters, so use it as it is rather than failing every retry.
      const exists = amqpReplyCode(error) === 406 && (await this.check(name)) !== undefined;
      if (!exists) throw classifyAmqpError(error, `declaring retry holding queue "${name}"`, this.config.url);
    }
    this.holding.set(name, Date.now());
    this.declaredQueues.add(name);
    rememberBounded(this.holding);
    rememberBounded(this.declaredQueues);
  }

  /** Passive declare: counts of an existing queue, or `undefined` when it does not exist. */
  async check(name: string): Promise<QueueCounts | undefined> {
    try {
      const ok = await this.run(`check queue "${name}"`, (ch) => ch.checkQueue(name));
      return { messageCount: ok.messageCount, consumerCount: ok.consumerCount };
    } catch (error) {
      if (amqpReplyCode(error) === 404) return undefined;
      throw classifyAmqpError(error, `inspecting queue "${name}"`, this.config.url);
    }
  }

  /** Deletes every queue and exchange this provider declared (tests and tooling only). */
  async deleteDeclared(): Promise<void> {
    for (const name of this.declaredQueues) {
      await this.run(`delete queue "${name}"`, (ch) => ch.deleteQueue(name)).catch((error: unknown) => {
        this.logger.debug("rabbitmq delete queue failed", { name, error: String(error) });
      });
    }
    for (const name of this.declaredExchanges) {
      await this.run(`delete exchange "${name}"`, (ch) => ch.deleteExchange(name)).catch(() => {});
    }
    this.declaredQueues.clear();
    this.declaredExchanges.clear();
    this.forget();
  }

  async close(): Promise<void> {
    const current = this.channel;
    this.channel = undefined;
    if (current !== undefined && !current.closed) await settleWithin(current.channel.close(), 2_000);
  }
}
