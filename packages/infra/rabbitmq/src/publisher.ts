import { type Logger, ProviderError } from "@factflow/protocols";
import type { ConfirmChannel, Message } from "amqplib";
import { amqpReplyCode, classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager, LiveConnection } from "./connection-manager.js";
import { type EncodedMessage, publishOptions } from "./envelope-codec.js";
import { settleWithin } from "./settle-within.js";

interface PendingConfirm {
  returned?: string;
}

/** The confirm channel of one connection generation, with the bookkeeping of mandatory returns. */
interface PublishChannel {
  readonly channel: ConfirmChannel;
  readonly generation: number;
  readonly pendingByKey: Map<string, PendingConfirm[]>;
  closed: boolean;
  /** Why the broker closed the channel (emitted before the pending confirms fail). */
  closeError: Error | undefined;
  drain: Promise<void> | undefined;
}

/** What one publish targets. */
export interface PublishTarget {
  readonly exchange: string;
  readonly routingKey: string;
  /** Unroutable messages are returned by the broker and the publish fails. */
  readonly mandatory: boolean;
  /** For error messages: the protocol destination. */
  readonly describe: string;
}

const keyOf = (exchange: string, routingKey: string, id: unknown) =>
  `${exchange}\u0000${routingKey}\u0000${String(id)}`;

/**
 * Publishes with publisher confirms. A publish resolves once the broker confirmed it; it is
 * retried on the next connection if the connection drops before the confirm (the copy keeps its
 * message id, so a duplicate is identifiable), fails if the broker returns it as unroutable or
 * nacks it, and always settles by the publish timeout.
 */
export class Publisher {
  private current: PublishChannel | undefined;
  private opening: Promise<PublishChannel> | undefined;

  constructor(
    private readonly connection: ConnectionManager,
    private readonly config: RabbitMqConfig,
    private readonly logger: Logger,
  ) {}

  /** Publishes `encoded` and waits for the broker's confirm. */
  async publish(target: PublishTarget, encoded: EncodedMessage): Promise<void> {
    const deadline = Date.now() + this.config.publishTimeoutMs;
    const what = `publish to "${target.describe}"`;
    let backoffMs = 25;
    const pause = async () => {
      // A connection that died but is not yet noticed fails fast; do not spin on it.
      await new Promise((resolve) =>
        setTimeout(resolve, Math.min(backoffMs, Math.max(0, deadline - Date.now()))),
      );
      backoffMs = Math.min(backoffMs * 2, 500);
    };
    for (;;) {
      // Fast path: connected, unblocked, channel open — no extra awaits on the hot path.
      const live = this.connection.current() ?? (await this.connection.waitForConnection(deadline, what));
      if (this.connection.isBlocked) await this.connection.waitUnblocked(deadline, what);
      let pc: PublishChannel;
      try {
        const open = this.current;
        pc =
          open !== undefined && !open.closed && open.generation === live.generation
            ? open
            : await this.channelFor(live);
      } catch (error) {
        if (this.canRetry(error, deadline)) {
          await pause();
          continue;
        }
        throw classifyAmqpError(error, what, this.config.url);
      }
      try {
        await this.sendOnce(pc, target, encoded, deadline, what);
        return;
      } catch (error) {
        if (this.canRetry(error, deadline)) {
          this.logger.debug("rabbitmq publish interrupted; retrying on the next channel", {
            destination: target.describe,
          });
          await pause();
          continue;
        }
        throw classifyAmqpError(error, what, this.config.url);
      }
    }
  }

  private canRetry(error: unknown, deadline: number): boolean {
    if (Date.now() >= deadline) return false;
    const reason = error instanceof ProviderError ? error.reason : classifyAmqpError(error, "publish").reason;
    return reason === "connection" || reason === "closed";
  }

  private async sendOnce(
    pc: PublishChannel,
    target: PublishTarget,
    encoded: EncodedMessage,
    deadline: number,
    what: string,
  ): Promise<void> {
    if (pc.drain !== undefined)
      await this.withDeadline(pc.drain, deadline, what, "the channel's write buffer to drain");
    const key = keyOf(target.exchange, target.routingKey, encoded.id);
    const entry: PendingConfirm = {};
    if (target.mandatory) {
      const list = pc.pendingByKey.get(key);
      if (list === undefined) pc.pendingByKey.set(key, [entry]);
      else list.push(entry);
    }
    const cleanup = () => {
      if (!target.mandatory) return;
      const list = pc.pendingByKey.get(key);
      if (list === undefined) return;
      const index = list.indexOf(entry);
      if (index >= 0) list.splice(index, 1);
      if (list.length === 0) pc.pendingByKey.delete(key);
    };
    const confirmed = new Promise<void>((resolve, reject) => {
      let ok: boolean;
      try {
        ok = pc.channel.publish(
          target.exchange,
          target.routingKey,
          encoded.content,
          publishOptions(encoded, target.mandatory),
          (err) => {
            cleanup();
            if (err !== null && err !== undefined) {
              const code = amqpReplyCode(pc.closeError);
              // The broker closed the channel because of this kind of publish (e.g. 404: the exchange
              // is gone): report that, not a transient "channel closed" that would be retried in vain.
              if (code === 403 || code === 404 || code === 406) {
                reject(classifyAmqpError(pc.closeError, what, this.config.url));
                return;
              }
              reject(
                pc.closed || /closed/i.test(String((err as Error).message ?? err))
                  ? classifyAmqpError(err, what, this.config.url)
                  : new ProviderError(
                      "rabbitmq",
                      "rejected",
                      `${what} was nacked by the broker (queue overflow or internal error); retry later`,
                      { cause: err, retryable: true },
                    ),
              );
            } else if (entry.returned !== undefined) {
              reject(
                new ProviderError(
                  "rabbitmq",
                  "not-found",
                  `${what} was returned as unroutable (${entry.returned}): no queue is bound to it; subscribe first or check the name`,
                ),
              );
            } else resolve();
          },
        );
      } catch (error) {
        cleanup();
        reject(error);
        return;
      }
      if (!ok && pc.drain === undefined) {
        pc.drain = new Promise<void>((resolve) => {
          const done = () => {
            pc.drain = undefined;
            resolve();
          };
          pc.channel.once("drain", done);
          pc.channel.once("close", done);
        });
      }
    });
    await this.withDeadline(confirmed, deadline, what, "the publisher confirm");
  }

  private withDeadline<T>(
    promise: Promise<T>,
    deadline: number,
    what: string,
    waitingFor: string,
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          reject(
            new ProviderError(
              "rabbitmq",
              "timeout",
              `${what} timed out after ${this.config.publishTimeoutMs} ms waiting for ${waitingFor}; the broker may be overloaded or unreachable (raise publishTimeoutMs if this is expected)`,
              { retryable: true },
            ),
          ),
        Math.max(0, deadline - Date.now()),
      );
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  private channelFor(live: LiveConnection): Promise<PublishChannel> {
    const pc = this.current;
    if (pc !== undefined && !pc.closed && pc.generation === live.generation) return Promise.resolve(pc);
    if (this.opening !== undefined) return this.opening;
    this.opening = this.open(live).finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async open(live: LiveConnection): Promise<PublishChannel> {
    const channel = await live.model.createConfirmChannel();
    const pc: PublishChannel = {
      channel,
      generation: live.generation,
      pendingByKey: new Map(),
      closed: false,
      closeError: undefined,
      drain: undefined,
    };
    channel.on("error", (error: Error) => {
      pc.closeError = error;
      this.logger.warn("rabbitmq publish channel error", {
        error: classifyAmqpError(error, "publish channel", this.config.url).message,
      });
    });
    channel.on("close", () => {
      pc.closed = true;
    });
    channel.on("return", (message: Message) => {
      const key = keyOf(message.fields.exchange, message.fields.routingKey, message.properties.messageId);
      const entry = pc.pendingByKey.get(key)?.find((e) => e.returned === undefined);
      if (entry !== undefined)
        entry.returned = (message.fields as { replyText?: string }).replyText ?? "NO_ROUTE";
    });
    this.current = pc;
    return pc;
  }

  /** Closes the publish channel (the connection manager closes the connection). */
  async close(): Promise<void> {
    const pc = this.current;
    this.current = undefined;
    if (pc !== undefined && !pc.closed) await settleWithin(pc.channel.close(), 2_000);
  }
}
