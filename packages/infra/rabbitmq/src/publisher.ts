import { backoffDelayMs, type Logger, ProviderError } from "@factflow/protocols";
import { DeadlineSweep, type Expiring, settleWithin } from "@factflow/provider-kit";
import type { ConfirmChannel, Message } from "amqplib";
import { amqpReplyCode, classifyAmqpError } from "./classify-error.js";
import type { RabbitMqConfig } from "./config.js";
import type { ConnectionManager, LiveConnection } from "./connection-manager.js";
import { type EncodedMessage, publishOptions } from "./envelope-codec.js";

/** The confirm channel of one connection generation, with the bookkeeping of mandatory returns. */
interface PublishChannel {
  readonly channel: ConfirmChannel;
  readonly generation: number;
  /** Mandatory publishes awaiting their confirm, by message id (a `basic.return` precedes the ack). */
  readonly pendingById: Map<string, PendingConfirm | PendingConfirm[]>;
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

const whatOf = (target: PublishTarget) => `publish to "${target.describe}"`;

/** Pauses before re-trying an interrupted publish on the next channel: 25 ms doubling to 500 ms. */
const PUBLISH_RETRY_BACKOFF = { initialDelayMs: 25, maxDelayMs: 500 } as const;

/**
 * One publish awaiting its confirm. Its deadline is watched by the publisher's single
 * {@link DeadlineSweep} rather than a timer of its own; whichever of confirm and deadline comes first
 * settles it.
 */
class PendingConfirm implements Expiring {
  /** Why the broker returned the message as unroutable, if it did. */
  returned: string | undefined = undefined;
  settled = false;

  constructor(
    readonly deadline: number,
    readonly target: PublishTarget,
    readonly id: string,
    readonly timeoutMs: number,
    readonly resolve: () => void,
    readonly reject: (error: unknown) => void,
  ) {}

  expire(): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(
      new ProviderError(
        "rabbitmq",
        "timeout",
        `${whatOf(this.target)} timed out after ${this.timeoutMs} ms waiting for the publisher confirm; the broker may be overloaded or unreachable (raise publishTimeoutMs if this is expected)`,
        { retryable: true },
      ),
    );
  }
}

/** Files a mandatory publish under its message id, so a `basic.return` can find it. */
function track(pc: PublishChannel, entry: PendingConfirm): void {
  const found = pc.pendingById.get(entry.id);
  if (found === undefined) pc.pendingById.set(entry.id, entry);
  else if (Array.isArray(found)) found.push(entry);
  else pc.pendingById.set(entry.id, [found, entry]);
}

function untrack(pc: PublishChannel, entry: PendingConfirm): void {
  const found = pc.pendingById.get(entry.id);
  if (found === entry) pc.pendingById.delete(entry.id);
  else if (Array.isArray(found)) {
    const index = found.indexOf(entry);
    if (index >= 0) found.splice(index, 1);
    if (found.length === 0) pc.pendingById.delete(entry.id);
  }
}

/**
 * Publishes with publisher confirms. A publish resolves once the broker confirmed it; it is
 * retried on the next connection if the connection drops before the confirm (the copy keeps its
 * message id, so a duplicate is identifiable), fails if the broker returns it as unroutable or
 * nacks it, and always settles by the publish timeout.
 */
export class Publisher {
  private current: PublishChannel | undefined;
  /** Deadlines of every publish awaiting its confirm. */
  private readonly deadlines = new DeadlineSweep<PendingConfirm>();
  private opening: Promise<PublishChannel> | undefined;

  constructor(
    private readonly connection: ConnectionManager,
    private readonly config: RabbitMqConfig,
    private readonly logger: Logger,
  ) {}

  /** Publishes `encoded` and waits for the broker's confirm. */
  async publish(target: PublishTarget, encoded: EncodedMessage): Promise<void> {
    const deadline = Date.now() + this.config.publishTimeoutMs;
    let retry = 0;
    for (;;) {
      // Fast path: connected, unblocked, channel open — no extra awaits on the hot path.
      const live =
        this.connection.current() ?? (await this.connection.waitForConnection(deadline, whatOf(target)));
      if (this.connection.isBlocked) await this.connection.waitUnblocked(deadline, whatOf(target));
      let error: unknown;
      try {
        const open = this.current;
        const pc =
          open !== undefined && !open.closed && open.generation === live.generation
            ? open
            : await this.channelFor(live);
        try {
          await this.sendOnce(pc, target, encoded, deadline);
          return;
        } catch (sendError) {
          error = sendError;
          if (this.canRetry(error, deadline)) {
            this.logger.debug("rabbitmq publish interrupted; retrying on the next channel", {
              destination: target.describe,
            });
          }
        }
      } catch (channelError) {
        error = channelError;
      }
      if (!this.canRetry(error, deadline)) throw classifyAmqpError(error, whatOf(target), this.config.url);
      // A connection that died but is not yet noticed fails fast; do not spin on it.
      retry += 1;
      const pause = backoffDelayMs(PUBLISH_RETRY_BACKOFF, retry);
      await new Promise((resolve) =>
        setTimeout(resolve, Math.min(pause, Math.max(0, deadline - Date.now()))),
      );
    }
  }

  private canRetry(error: unknown, deadline: number): boolean {
    if (Date.now() >= deadline) return false;
    const reason = error instanceof ProviderError ? error.reason : classifyAmqpError(error, "publish").reason;
    return reason === "connection" || reason === "closed";
  }

  /**
   * One attempt on one channel. The hot path allocates the pending entry, its promise and the
   * confirm callback, and no timer: the deadline is watched by {@link DeadlineSweep}.
   */
  private async sendOnce(
    pc: PublishChannel,
    target: PublishTarget,
    encoded: EncodedMessage,
    deadline: number,
  ): Promise<void> {
    if (pc.drain !== undefined)
      await this.withDeadline(pc.drain, deadline, whatOf(target), "the channel's write buffer to drain");
    return new Promise<void>((resolve, reject) => {
      const entry = new PendingConfirm(
        deadline,
        target,
        encoded.id,
        this.config.publishTimeoutMs,
        resolve,
        reject,
      );
      if (target.mandatory) track(pc, entry);
      this.deadlines.add(entry);
      let ok: boolean;
      try {
        ok = pc.channel.publish(
          target.exchange,
          target.routingKey,
          encoded.content,
          publishOptions(encoded, target.mandatory),
          (err) => this.confirmed(pc, entry, err),
        );
      } catch (error) {
        if (target.mandatory) untrack(pc, entry);
        this.deadlines.delete(entry);
        entry.settled = true;
        reject(error);
        return;
      }
      if (!ok && pc.drain === undefined) {
        pc.drain = new Promise<void>((done) => {
          const drained = () => {
            pc.drain = undefined;
            done();
          };
          pc.channel.once("drain", drained);
          pc.channel.once("close", drained);
        });
      }
    });
  }

  /** amqplib's confirm callback: the broker acked (`err` null) or nacked, or the channel closed. */
  private confirmed(pc: PublishChannel, entry: PendingConfirm, err: unknown): void {
    if (entry.target.mandatory) untrack(pc, entry);
    // Already timed out: the caller has its error.
    if (entry.settled) return;
    entry.settled = true;
    this.deadlines.delete(entry);
    if (err !== null && err !== undefined) {
      const what = whatOf(entry.target);
      const code = amqpReplyCode(pc.closeError);
      // The broker closed the channel because of this kind of publish (e.g. 404: the exchange
      // is gone): report that, not a transient "channel closed" that would be retried in vain.
      if (code === 403 || code === 404 || code === 406) {
        entry.reject(classifyAmqpError(pc.closeError, what, this.config.url));
        return;
      }
      entry.reject(
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
      entry.reject(
        new ProviderError(
          "rabbitmq",
          "not-found",
          `${whatOf(entry.target)} was returned as unroutable (${entry.returned}): no queue is bound to it; subscribe first or check the name`,
        ),
      );
    } else entry.resolve();
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
      pendingById: new Map(),
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
      const { exchange, routingKey } = message.fields;
      const found = pc.pendingById.get(String(message.properties.messageId));
      const candidates = found === undefined ? [] : Array.isArray(found) ? found : [found];
      const entry = candidates.find(
        (e) =>
          e.returned === undefined && e.target.exchange === exchange && e.target.routingKey === routingKey,
      );
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
