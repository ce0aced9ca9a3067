import { type Logger, ProviderError } from "@factflow/protocols";
import {
  Client,
  type IFrame,
  type IMessage,
  ReconnectionTimeMode,
  type StompSubscription,
} from "@stomp/stompjs";
import { BatchedTcpWrapper } from "./batched-tcp-wrapper.js";
import { classifyArtemisError } from "./classify-error.js";
import type { ArtemisConfig, ArtemisEndpoint } from "./config.js";

interface PendingReceipt {
  readonly resolve: () => void;
  readonly reject: (error: ProviderError) => void;
  readonly timer: NodeJS.Timeout;
  readonly what: string;
}

/** A STOMP subscription on one particular connection. */
export interface LinkSubscription {
  readonly id: string;
  /** The connection generation it was made on. */
  readonly generation: number;
  /** Sends UNSUBSCRIBE and waits for its receipt (resolves at once when the connection is gone). */
  unsubscribe(): Promise<void>;
}

/**
 * One STOMP 1.2 connection over TCP that comes back by itself. Every CONNECTED starts a new
 * `generation`; subscriptions and unsettled deliveries belong to the generation that made them, and
 * listeners re-subscribe on each new one. Every SEND carries a `receipt` and resolves on the
 * RECEIPT; a timeout, an ERROR frame naming it, or the loss of the connection rejects it.
 */
export class StompLink {
  private readonly client: Client;
  private readonly pending = new Map<string, PendingReceipt>();
  private readonly connectedListeners = new Set<(generation: number) => void>();
  private readonly waiters = new Set<() => void>();
  private generationValue = 0;
  private connected = false;
  private lastError: unknown;
  private closed = false;
  /** Receipt ids only need to be unique on this client. */
  private receiptCounter = 0;

  constructor(
    endpoint: ArtemisEndpoint,
    private readonly config: ArtemisConfig,
    private readonly logger: Logger,
    private readonly label: string,
  ) {
    const connectHeaders: Record<string, string> = { host: "localhost" };
    if (endpoint.login !== undefined) connectHeaders.login = endpoint.login;
    if (endpoint.passcode !== undefined) connectHeaders.passcode = endpoint.passcode;
    this.client = new Client({
      webSocketFactory: () => new BatchedTcpWrapper(endpoint.host, endpoint.port),
      connectHeaders,
      heartbeatIncoming: config.heartbeatMs,
      heartbeatOutgoing: config.heartbeatMs,
      connectionTimeout: config.connectTimeoutMs,
      reconnectDelay: config.reconnectDelayMs,
      maxReconnectDelay: config.maxReconnectDelayMs,
      reconnectTimeMode: ReconnectionTimeMode.EXPONENTIAL,
      discardWebsocketOnCommFailure: true,
      debug: () => {},
    });
    this.client.onConnect = () => this.handleConnected();
    this.client.onWebSocketClose = () => this.handleDisconnected("the connection closed");
    this.client.onWebSocketError = (event: unknown) => {
      this.lastError = event;
    };
    this.client.onStompError = (frame: IFrame) => this.handleError(frame);
    this.client.onUnhandledReceipt = () => {};
    this.client.onUnhandledMessage = () => {};
  }

  /** Increments on every successful CONNECT. */
  get generation(): number {
    return this.generationValue;
  }

  get isConnected(): boolean {
    return this.connected;
  }

  /** Calls `listener` after every (re)connect, with the new generation. */
  onConnected(listener: (generation: number) => void): () => void {
    this.connectedListeners.add(listener);
    return () => this.connectedListeners.delete(listener);
  }

  /** Starts connecting; resolves on the first CONNECTED, rejects after `connectTimeoutMs` with the cause. */
  async connect(): Promise<void> {
    this.client.activate();
    try {
      await this.whenConnected(this.config.connectTimeoutMs, `connect to the broker (${this.label})`);
    } catch (error) {
      await this.client.deactivate({ force: true }).catch(() => {});
      throw error;
    }
  }

  /** Resolves once connected, or rejects after `timeoutMs`. */
  async whenConnected(timeoutMs: number, what: string): Promise<void> {
    if (this.connected) return;
    if (this.closed) throw new ProviderError("artemis", "closed", `${what}: the provider is closed`);
    await new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(done);
        const cause = this.lastError;
        reject(
          cause === undefined
            ? new ProviderError(
                "artemis",
                "timeout",
                `${what}: no STOMP connection within ${timeoutMs} ms; is the broker up (bash scripts/services/artemis.sh status)?`,
              )
            : classifyArtemisError(cause, what),
        );
      }, timeoutMs);
      this.waiters.add(done);
    });
  }

  /** SENDs with a receipt and resolves on the RECEIPT. */
  async send(
    destination: string,
    headers: Record<string, string>,
    body: string,
    what: string,
    options: { readonly rawText?: boolean } = {},
  ): Promise<void> {
    await this.whenConnected(this.config.receiptTimeoutMs, what);
    const receipt = this.nextReceipt();
    const settled = this.expectReceipt(receipt, what);
    try {
      // Object.assign, not a spread: a spread is only fast while its call site sees one shape.
      const frameHeaders: Record<string, string> = Object.assign({}, headers);
      frameHeaders.receipt = receipt;
      this.client.publish({
        destination,
        headers: frameHeaders,
        body,
        ...(options.rawText === true ? { skipContentLengthHeader: true } : {}),
      });
    } catch (error) {
      this.failReceipt(receipt, classifyArtemisError(error, what));
    }
    await settled;
  }

  /**
   * Subscribes on the current connection. With `confirm`, the SUBSCRIBE carries a receipt and this
   * resolves once the broker has registered the consumer.
   */
  async subscribe(
    destination: string,
    headers: Record<string, string>,
    onMessage: (message: IMessage, generation: number) => void,
    confirm = true,
  ): Promise<LinkSubscription> {
    const what = `subscribe to "${destination}"`;
    if (!this.connected) await this.whenConnected(this.config.receiptTimeoutMs, what);
    const generation = this.generationValue;
    const receipt = this.nextReceipt();
    const settled = confirm ? this.expectReceipt(receipt, what) : Promise.resolve();
    let subscription: StompSubscription;
    try {
      subscription = this.client.subscribe(destination, (message) => onMessage(message, generation), {
        ...headers,
        ...(confirm ? { receipt } : {}),
      });
    } catch (error) {
      this.failReceipt(receipt, classifyArtemisError(error, what));
      await settled;
      throw classifyArtemisError(error, what);
    }
    try {
      await settled;
    } catch (error) {
      // No RECEIPT: the SUBSCRIBE may still reach the broker later (a stalled link). Withdraw it so
      // no consumer nobody tracks can take (and hold) deliveries; best effort, no receipt.
      try {
        if (this.connected && this.generationValue === generation) subscription.unsubscribe();
      } catch {
        // The connection is gone: so is the consumer.
      }
      throw error;
    }
    // Once only: Artemis answers a second UNSUBSCRIBE of the same id with an ERROR frame and closes
    // the connection (overlapping restarts each let go of the consumer they replaced, the same one).
    let unsubscribed: Promise<void> | undefined;
    const unsubscribeOnce = async (): Promise<void> => {
      if (!this.connected || this.generationValue !== generation) return;
      const unsubscribeReceipt = this.nextReceipt();
      const done = this.expectReceipt(unsubscribeReceipt, `unsubscribe from "${destination}"`);
      try {
        subscription.unsubscribe({ receipt: unsubscribeReceipt });
      } catch (error) {
        this.failReceipt(
          unsubscribeReceipt,
          classifyArtemisError(error, `unsubscribe from "${destination}"`),
        );
      }
      await done.catch(() => {});
    };
    return {
      id: subscription.id,
      generation,
      unsubscribe: () => {
        unsubscribed ??= unsubscribeOnce();
        return unsubscribed;
      },
    };
  }

  /**
   * Sends ACK for one delivery on the live connection. The settlement guard decides beforehand
   * whether that is still the connection that delivered it. False when there is no connection.
   */
  ack(ackId: string, subscriptionId: string): boolean {
    if (!this.connected) return false;
    try {
      this.client.ack(ackId, subscriptionId);
      return true;
    } catch {
      return false;
    }
  }

  /** DISCONNECT, and no reconnect afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.deactivate().catch(() => {});
    this.handleDisconnected("the provider closed");
  }

  /** Cuts the socket without DISCONNECT, as a network failure would (tests and tooling). */
  forceDisconnect(): void {
    this.client.forceDisconnect();
  }

  private nextReceipt(): string {
    this.receiptCounter += 1;
    return `r${this.receiptCounter.toString(36)}`;
  }

  private expectReceipt(receipt: string, what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.failReceipt(
          receipt,
          new ProviderError(
            "artemis",
            "timeout",
            `${what}: no RECEIPT within ${this.config.receiptTimeoutMs} ms; the broker may not have the message (raise receiptTimeoutMs if the broker is slow)`,
          ),
        );
      }, this.config.receiptTimeoutMs);
      this.pending.set(receipt, { resolve, reject, timer, what });
      this.client.watchForReceipt(receipt, () => {
        const entry = this.pending.get(receipt);
        if (entry === undefined) return;
        this.pending.delete(receipt);
        clearTimeout(entry.timer);
        entry.resolve();
      });
    });
  }

  private failReceipt(receipt: string, error: ProviderError): void {
    const entry = this.pending.get(receipt);
    if (entry === undefined) return;
    this.pending.delete(receipt);
    clearTimeout(entry.timer);
    entry.reject(error);
  }

  private handleConnected(): void {
    this.generationValue += 1;
    this.connected = true;
    this.lastError = undefined;
    for (const waiter of [...this.waiters]) waiter();
    for (const listener of this.connectedListeners) {
      try {
        listener(this.generationValue);
      } catch (error) {
        this.logger.warn("artemis: a reconnect listener failed", { error: String(error) });
      }
    }
  }

  private handleDisconnected(why: string): void {
    const wasConnected = this.connected;
    this.connected = false;
    if (wasConnected && !this.closed) this.logger.warn(`artemis: ${why}; reconnecting`, { link: this.label });
    for (const [receipt, entry] of [...this.pending]) {
      this.failReceipt(
        receipt,
        new ProviderError(
          "artemis",
          this.closed ? "closed" : "connection",
          `${entry.what}: ${why} before the RECEIPT arrived; the message may or may not be on the broker, retry it`,
        ),
      );
    }
  }

  private handleError(frame: IFrame): void {
    const receipt = frame.headers["receipt-id"];
    const error = classifyArtemisError(frame, receipt === undefined ? "STOMP connection" : "SEND");
    if (receipt !== undefined && this.pending.has(receipt)) {
      const entry = this.pending.get(receipt);
      this.failReceipt(receipt, classifyArtemisError(frame, entry?.what ?? "SEND"));
      return;
    }
    this.lastError = frame;
    this.logger.warn("artemis: broker sent ERROR; it closes the connection", { error: error.message });
  }
}
