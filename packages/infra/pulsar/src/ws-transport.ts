import { ProviderError } from "@factflow/protocols";
import { type Corkable, TurnCork } from "@factflow/provider-kit";
import WebSocket from "ws";
import type {
  CloseCause,
  ConsumerLink,
  ConsumerOptions,
  IncomingMessage,
  OutgoingMessage,
  ProducerLink,
  PulsarTransport,
} from "./transport.js";

/** Where and how the WebSocket transport connects. */
export interface WsTransportOptions {
  /** `ws://host:port`, the broker's web service. */
  readonly url: string;
  readonly tenant: string;
  readonly namespace: string;
  readonly connectTimeoutMs: number;
  readonly pingIntervalMs: number;
}

/**
 * Longest a local close waits for the broker's side of the close handshake before the socket is
 * terminated. Without one, `ws` would keep a stalled connection for 30 s.
 */
const CLOSE_GRACE_MS = 2_000;

function connectionError(message: string, cause?: unknown): ProviderError {
  return new ProviderError("pulsar", "connection", message, { cause, retryable: true });
}

/**
 * One WebSocket with liveness: pings every `pingIntervalMs`, terminated when two intervals pass
 * without a pong (a silently dead or stalled connection), and one close notification whatever ends it.
 */
class Socket {
  closed = false;
  private readonly closeListeners: ((cause: CloseCause) => void)[] = [];
  private reader: ((data: WebSocket.RawData) => void) | undefined;
  /**
   * Frames that arrived before a reader was attached. The broker may push a consumer's backlog in
   * the same TCP read as the handshake answer, so frames can come in before the code awaiting the
   * open runs; without this buffer they would be dropped, and never acknowledged.
   */
  private early: WebSocket.RawData[] = [];
  private alive = true;
  private readonly pinger: NodeJS.Timeout;
  private localClose = false;

  constructor(
    readonly ws: WebSocket,
    pingIntervalMs: number,
  ) {
    ws.on("pong", () => {
      this.alive = true;
    });
    ws.on("message", (data) => {
      if (this.reader === undefined) this.early.push(data);
      else this.reader(data);
    });
    this.pinger = setInterval(() => {
      if (!this.alive) {
        ws.terminate();
        return;
      }
      this.alive = false;
      try {
        ws.ping();
      } catch {
        ws.terminate();
      }
    }, pingIntervalMs);
    this.pinger.unref();
    ws.on("close", (code, reason) => {
      this.finish(
        this.localClose
          ? { kind: "local" }
          : {
              kind: "remote",
              detail: `closed with ${code}${reason.length > 0 ? ` ${reason.toString()}` : ""}`,
            },
      );
    });
    ws.on("error", () => {
      // "close" follows every error; the error itself is reported there.
    });
  }

  /** Attaches the one reader of incoming frames; frames that came before it are handed over first. */
  onFrame(reader: (data: WebSocket.RawData) => void): void {
    this.reader = reader;
    const early = this.early;
    this.early = [];
    for (const data of early) reader(data);
  }

  send(frame: string): boolean {
    if (this.closed || this.ws.readyState !== WebSocket.OPEN) return false;
    this.corkUntilNextTurn();
    this.ws.send(frame);
    return true;
  }

  private cork: TurnCork | undefined;

  /**
   * One socket write for the frames sent during one event-loop turn (handlers settling and
   * publishing 50 deliveries would otherwise make 50 system calls): the kit's {@link TurnCork} on
   * the TCP socket under the WebSocket. Uses `ws`'s underlying socket; without one, frames are
   * written one by one as usual.
   */
  private corkUntilNextTurn(): void {
    if (this.cork === undefined) {
      const raw = (this.ws as unknown as { _socket?: Partial<Corkable> })._socket;
      if (typeof raw?.cork !== "function" || typeof raw.uncork !== "function") return;
      this.cork = new TurnCork(raw as Corkable);
    }
    this.cork.beforeWrite();
  }

  onClose(listener: (cause: CloseCause) => void): void {
    if (this.closed) listener({ kind: "local" });
    else this.closeListeners.push(listener);
  }

  /**
   * Closes with a close handshake, so the frames sent before it (acknowledgements of this very turn,
   * still corked) reach the broker first: a terminated socket drops them, and the broker hands the
   * messages they settled to another consumer. A connection that does not finish the handshake
   * within {@link CLOSE_GRACE_MS} (stalled, or not open) is terminated.
   */
  close(): void {
    if (this.closed) return;
    this.localClose = true;
    if (this.ws.readyState === WebSocket.OPEN) {
      const ws = this.ws;
      const fallback = setTimeout(() => ws.terminate(), CLOSE_GRACE_MS);
      fallback.unref();
      ws.once("close", () => clearTimeout(fallback));
      ws.close(1000);
    } else this.ws.terminate();
    this.finish({ kind: "local" });
  }

  private finish(cause: CloseCause): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.pinger);
    for (const listener of this.closeListeners.splice(0)) listener(cause);
  }
}

interface PendingSend {
  resolve(messageId: string): void;
  reject(error: Error): void;
  /** Epoch ms after which the send is given up. */
  deadline: number;
}

class WsProducer implements ProducerLink {
  private readonly pending = new Map<string, PendingSend>();
  private next = 0;

  constructor(
    private readonly socket: Socket,
    private readonly topic: string,
  ) {
    socket.onFrame((data) => this.reply(data));
    socket.onClose((cause) => {
      const error = connectionError(
        `the producer connection for topic "${topic}" closed before the broker confirmed the message${cause.kind === "remote" ? ` (${cause.detail})` : ""}; publish again`,
      );
      for (const entry of this.pending.values()) entry.reject(error);
      this.pending.clear();
      clearTimeout(this.sweeper);
    });
  }

  get closed(): boolean {
    return this.socket.closed;
  }

  send(message: OutgoingMessage, timeoutMs: number): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      this.next += 1;
      const context = String(this.next);
      let frame = `{"payload":"${message.payload}","context":"${context}"`;
      if (message.deliverAfterMs !== undefined && message.deliverAfterMs > 0)
        frame += `,"deliverAfterMs":${Math.ceil(message.deliverAfterMs)}`;
      if (message.key !== undefined) frame += `,"key":${JSON.stringify(message.key)}`;
      frame += "}";
      if (!this.socket.send(frame)) {
        reject(connectionError(`the producer connection for topic "${this.topic}" is closed; publish again`));
        return;
      }
      this.pending.set(context, { resolve, reject, deadline: Date.now() + timeoutMs });
      this.timeoutMs = timeoutMs;
      this.arm();
    });
  }

  private timeoutMs = 0;
  private sweeper: NodeJS.Timeout | undefined;

  /** One timer for every pending send: sends are answered in order, so the oldest expires first. */
  private arm(): void {
    if (this.sweeper !== undefined || this.pending.size === 0) return;
    const first = this.pending.values().next().value as PendingSend;
    this.sweeper = setTimeout(() => this.sweep(), Math.max(10, first.deadline - Date.now()));
    this.sweeper.unref();
  }

  private sweep(): void {
    this.sweeper = undefined;
    const now = Date.now();
    const first = this.pending.values().next().value as PendingSend | undefined;
    if (first !== undefined && first.deadline <= now) {
      const error = new ProviderError(
        "pulsar",
        "timeout",
        `the broker did not confirm a message on topic "${this.topic}" within ${this.timeoutMs} ms; the connection is dropped and the next publish opens a new one (check the broker, or raise publishTimeoutMs)`,
      );
      // A connection that stalls on one send stalls on all of them: fail them all and start afresh.
      for (const entry of this.pending.values()) entry.reject(error);
      this.pending.clear();
      this.socket.close();
      return;
    }
    this.arm();
  }

  private reply(data: WebSocket.RawData): void {
    let reply: {
      result?: string;
      messageId?: string;
      context?: string;
      errorMsg?: string;
      errorCode?: number;
    };
    try {
      reply = JSON.parse(data.toString()) as typeof reply;
    } catch {
      return;
    }
    if (reply.context === undefined) return;
    const entry = this.pending.get(reply.context);
    if (entry === undefined) return;
    this.pending.delete(reply.context);
    if (reply.result === "ok" && typeof reply.messageId === "string") entry.resolve(reply.messageId);
    else
      entry.reject(
        new ProviderError(
          "pulsar",
          "rejected",
          `the broker refused a message on topic "${this.topic}": ${reply.errorMsg ?? reply.result ?? "no reason given"} (code ${reply.errorCode ?? "?"})`,
        ),
      );
  }

  close(): void {
    this.socket.close();
  }

  onClose(listener: (cause: CloseCause) => void): void {
    this.socket.onClose(listener);
  }
}

class WsConsumer implements ConsumerLink {
  private listener: ((message: IncomingMessage) => void) | undefined;
  /** Messages decoded before `onMessage` was called (frames buffered by the socket are read at once). */
  private early: IncomingMessage[] = [];

  constructor(private readonly socket: Socket) {
    socket.onFrame((data) => {
      let frame: { messageId?: string; payload?: string; publishTime?: string; redeliveryCount?: number };
      try {
        frame = JSON.parse(data.toString()) as typeof frame;
      } catch {
        return;
      }
      if (typeof frame.messageId !== "string" || typeof frame.payload !== "string") return;
      const message: IncomingMessage = {
        messageId: frame.messageId,
        payload: frame.payload,
        publishTime: frame.publishTime,
        redeliveryCount: typeof frame.redeliveryCount === "number" ? frame.redeliveryCount : 0,
      };
      if (this.listener === undefined) this.early.push(message);
      else this.listener(message);
    });
  }

  get closed(): boolean {
    return this.socket.closed;
  }

  onMessage(listener: (message: IncomingMessage) => void): void {
    this.listener = listener;
    const early = this.early;
    this.early = [];
    for (const message of early) listener(message);
  }

  onClose(listener: (cause: CloseCause) => void): void {
    this.socket.onClose(listener);
  }

  /**
   * A no-op: the consumer runs in push mode, where the broker's WebSocket handler sends at most
   * `receiverQueueSize` messages that are neither acknowledged nor negatively acknowledged, which is
   * the same window as a permit per settlement, without the extra frame.
   */
  permit(_n: number): void {}

  ack(messageId: string): void {
    this.socket.send(`{"messageId":${JSON.stringify(messageId)}}`);
  }

  nack(messageId: string): void {
    this.socket.send(`{"type":"negativeAcknowledge","messageId":${JSON.stringify(messageId)}}`);
  }

  close(): void {
    this.socket.close();
  }
}

/** Pulsar's WebSocket API (`/ws/v2/producer|consumer/persistent/<tenant>/<namespace>/<topic>`) over `ws`. */
export class WsTransport implements PulsarTransport {
  readonly kind = "websocket";
  private readonly sockets = new Set<Socket>();
  private opened = 0;

  constructor(private readonly options: WsTransportOptions) {}

  private base(role: "producer" | "consumer", topic: string): string {
    const { url, tenant, namespace } = this.options;
    return `${url}/ws/v2/${role}/persistent/${tenant}/${namespace}/${topic}`;
  }

  private open(url: string, what: string): Promise<Socket> {
    const { connectTimeoutMs, pingIntervalMs } = this.options;
    return new Promise<Socket>((resolve, reject) => {
      const ws = new WebSocket(url, { handshakeTimeout: connectTimeoutMs, perMessageDeflate: false });
      let settled = false;
      const fail = (message: string, cause?: unknown) => {
        if (settled) return;
        settled = true;
        ws.terminate();
        reject(connectionError(`${what}: ${message}`, cause));
      };
      ws.once("unexpected-response", (_request, response) => {
        let body = "";
        response.on("data", (chunk: Buffer) => {
          if (body.length < 500) body += chunk.toString();
        });
        response.on("end", () =>
          fail(
            `the broker answered HTTP ${response.statusCode}${body === "" ? "" : `: ${body.slice(0, 300)}`}`,
          ),
        );
        response.on("error", () => fail(`the broker answered HTTP ${response.statusCode}`));
      });
      ws.once("error", (error) =>
        fail(
          `${error.message} (is the broker running with webSocketServiceEnabled=true at ${this.options.url}?)`,
          error,
        ),
      );
      ws.once("close", () => fail("the connection closed during the handshake"));
      ws.once("open", () => {
        if (settled) return;
        settled = true;
        this.opened += 1;
        const socket = new Socket(ws, pingIntervalMs);
        this.sockets.add(socket);
        socket.onClose(() => this.sockets.delete(socket));
        resolve(socket);
      });
    });
  }

  async openProducer(topic: string): Promise<ProducerLink> {
    const socket = await this.open(this.base("producer", topic), `opening a producer on topic "${topic}"`);
    return new WsProducer(socket, topic);
  }

  async openConsumer(topic: string, subscription: string, options: ConsumerOptions): Promise<ConsumerLink> {
    const query = new URLSearchParams({
      subscriptionType: options.subscriptionType,
      receiverQueueSize: String(options.receiverQueueSize),
      negativeAckRedeliveryDelay: String(options.negativeAckRedeliveryDelayMs),
    });
    const url = `${this.base("consumer", topic)}/${encodeURIComponent(subscription)}?${query.toString()}`;
    const socket = await this.open(url, `subscribing to topic "${topic}" as "${subscription}"`);
    return new WsConsumer(socket);
  }

  openedCount(): number {
    return this.opened;
  }

  closeAll(): void {
    for (const socket of [...this.sockets]) socket.close();
  }
}
