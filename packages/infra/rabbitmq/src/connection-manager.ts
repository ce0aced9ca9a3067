import { backoffDelayMs, type Logger, ProviderError } from "@factflow/protocols";
import amqp, { type ChannelModel } from "amqplib";
import { classifyAmqpError } from "./classify-error.js";
import { type RabbitMqConfig, redactUrl } from "./config.js";
import { batchSocketWrites } from "./write-batching.js";

/** Longest a graceful close may take before the socket is destroyed (a stalled peer never answers). */
const CLOSE_GRACE_MS = 2_000;

/**
 * Closes a connection gracefully, or destroys its socket when the broker does not answer the close
 * in time, so `close()` never hangs on a stalled network.
 */
export async function closeModel(model: ChannelModel): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    model.close().then(
      () => true,
      () => true,
    ),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS);
    }),
  ]);
  clearTimeout(timer);
  if (!closed) {
    // amqplib keeps the socket on `connection.stream`; it is not in the typings.
    const stream = (model.connection as unknown as { stream?: { destroy(): void } }).stream;
    stream?.destroy();
  }
}

/** One established AMQP connection. `generation` grows by one with every (re)connect. */
export interface LiveConnection {
  readonly model: ChannelModel;
  readonly generation: number;
}

type Waiter = { resolve: () => void; reject: (error: Error) => void };

/**
 * Owns the AMQP connection: the first connect, heartbeats, reconnect with exponential backoff
 * after a loss, and the broker's `blocked`/`unblocked` flow control. Other parts register a hook
 * that runs on every (re)connect (reopen channels, re-declare, resubscribe).
 */
export class ConnectionManager {
  private live: LiveConnection | undefined;
  private generation = 0;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private reconnectAttempt = 0;
  private blockedReason: string | undefined;
  private connectWaiters: Waiter[] = [];
  private unblockWaiters: Waiter[] = [];
  private readonly hooks: ((live: LiveConnection) => Promise<void>)[] = [];
  /** Connections opened since construction (the first one included). */
  connectCount = 0;

  constructor(
    private readonly config: RabbitMqConfig,
    private readonly logger: Logger,
  ) {}

  /** Registers work to run after every successful (re)connect, in registration order. */
  onConnected(hook: (live: LiveConnection) => Promise<void>): void {
    this.hooks.push(hook);
  }

  current(): LiveConnection | undefined {
    return this.live;
  }

  get isBlocked(): boolean {
    return this.blockedReason !== undefined;
  }

  /** Opens the first connection; rejects with a classified error if the broker cannot be reached. */
  async connect(): Promise<void> {
    if (this.live !== undefined) return;
    const model = await this.open();
    await this.adopt(model);
  }

  private async open(): Promise<ChannelModel> {
    const url = new URL(this.config.url);
    url.searchParams.set("heartbeat", String(this.config.heartbeatSeconds));
    let timer: NodeJS.Timeout | undefined;
    const attempt = amqp.connect(url.toString(), {
      timeout: this.config.connectTimeoutMs,
      clientProperties: { connection_name: this.config.connectionName },
    });
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new ProviderError(
              "rabbitmq",
              "timeout",
              `connecting to ${redactUrl(this.config.url)} took longer than ${this.config.connectTimeoutMs} ms; check the broker is up or raise connectTimeoutMs`,
            ),
          ),
        this.config.connectTimeoutMs,
      );
    });
    try {
      return await Promise.race([attempt, timeout]);
    } catch (error) {
      // A connection that completes after the timeout must not linger.
      attempt.then(
        (late) => closeModel(late),
        () => {},
      );
      throw classifyAmqpError(error, `connecting to ${redactUrl(this.config.url)}`, this.config.url);
    } finally {
      clearTimeout(timer);
    }
  }

  private async adopt(model: ChannelModel): Promise<void> {
    if (this.closed) {
      await closeModel(model);
      throw this.closedError();
    }
    this.generation += 1;
    this.connectCount += 1;
    const live: LiveConnection = { model, generation: this.generation };
    batchSocketWrites(model);
    model.on("error", (error: Error) => {
      this.logger.warn("rabbitmq connection error", {
        error: classifyAmqpError(error, "connection", this.config.url).message,
      });
    });
    model.on("close", () => this.lost(live));
    model.on("blocked", (reason: string) => {
      this.blockedReason = reason || "resource alarm";
      this.logger.warn("rabbitmq broker blocked publishing", { reason: this.blockedReason });
    });
    model.on("unblocked", () => this.unblock());
    this.live = live;
    this.reconnectAttempt = 0;
    for (const hook of this.hooks) {
      try {
        await hook(live);
      } catch (error) {
        this.logger.warn("rabbitmq reconnect hook failed", {
          error: classifyAmqpError(error, "setup", this.config.url).message,
        });
        if (this.live !== live) return;
      }
    }
    const waiters = this.connectWaiters;
    this.connectWaiters = [];
    for (const w of waiters) w.resolve();
  }

  private unblock(): void {
    this.blockedReason = undefined;
    const waiters = this.unblockWaiters;
    this.unblockWaiters = [];
    for (const w of waiters) w.resolve();
  }

  private lost(live: LiveConnection): void {
    if (this.live !== live) return;
    this.live = undefined;
    // A new connection starts unblocked; the broker re-sends `blocked` if the alarm persists.
    this.unblock();
    if (this.closed) return;
    this.logger.warn("rabbitmq connection lost; reconnecting", { generation: live.generation });
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer !== undefined) return;
    // Jitter spreads reconnects of many processes after a broker restart.
    const backoff = {
      initialDelayMs: this.config.reconnectInitialDelayMs,
      maxDelayMs: this.config.reconnectMaxDelayMs,
      jitter: 0.2,
    };
    const delay = Math.round(backoffDelayMs(backoff, this.reconnectAttempt + 1));
    this.reconnectAttempt += 1;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      void this.reconnect();
    }, delay);
  }

  private async reconnect(): Promise<void> {
    if (this.closed || this.live !== undefined) return;
    try {
      const model = await this.open();
      await this.adopt(model);
    } catch (error) {
      if (this.closed) return;
      this.logger.warn("rabbitmq reconnect attempt failed", {
        attempt: this.reconnectAttempt,
        error: error instanceof Error ? error.message : String(error),
      });
      this.scheduleReconnect();
    }
  }

  private closedError(): ProviderError {
    return new ProviderError("rabbitmq", "closed", "the provider is closed; create a new one to reconnect");
  }

  /** Resolves with the live connection, waiting for a reconnect until `deadline` (epoch ms). */
  async waitForConnection(deadline: number, what: string): Promise<LiveConnection> {
    for (;;) {
      if (this.closed) throw this.closedError();
      if (this.live !== undefined) return this.live;
      await this.wait(this.connectWaiters, deadline, () => {
        return new ProviderError(
          "rabbitmq",
          "connection",
          `${what}: not connected to ${redactUrl(this.config.url)} and no reconnect succeeded in time; check the broker`,
          { code: "provider_not_connected", retryable: true },
        );
      });
    }
  }

  /** Waits while the broker blocks publishing (memory or disk alarm), until `deadline`. */
  async waitUnblocked(deadline: number, what: string): Promise<void> {
    while (this.blockedReason !== undefined) {
      const reason = this.blockedReason;
      await this.wait(this.unblockWaiters, deadline, () => {
        return new ProviderError(
          "rabbitmq",
          "timeout",
          `${what}: the broker has blocked publishing (${reason}) for longer than the publish timeout; free memory/disk on the broker`,
          { retryable: true },
        );
      });
    }
  }

  private wait(list: Waiter[], deadline: number, onTimeout: () => Error): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        reject(onTimeout());
        return;
      }
      const waiter: Waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        const index = list.indexOf(waiter);
        if (index >= 0) list.splice(index, 1);
        reject(onTimeout());
      }, remaining);
      list.push(waiter);
    });
  }

  /** Drops the current connection without reconnecting, leaving the manager usable for a new `connect()`. */
  async abandon(): Promise<void> {
    const live = this.live;
    if (live === undefined) return;
    this.live = undefined;
    await closeModel(live.model);
  }

  /** Closes the connection for good and fails every waiter. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = undefined;
    const error = this.closedError();
    for (const w of [...this.connectWaiters, ...this.unblockWaiters]) w.reject(error);
    this.connectWaiters = [];
    this.unblockWaiters = [];
    const live = this.live;
    this.live = undefined;
    if (live !== undefined) await closeModel(live.model);
  }
}
