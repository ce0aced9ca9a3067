import { type AddressInfo, createServer, type Server, Socket } from "node:net";

/** Where the proxy forwards to. */
export interface ProxyTarget {
  readonly host: string;
  readonly port: number;
}

/** Options of {@link createFaultProxy}. */
export interface FaultProxyOptions {
  readonly target: ProxyTarget;
  /** Interface to listen on. @default "127.0.0.1" */
  readonly listenHost?: string;
  /** Port to listen on; 0 picks a free one. @default 0 */
  readonly listenPort?: number;
}

/**
 * A TCP proxy in front of a broker that a test can make slow, silent or broken on demand. Clients
 * connect to `host:port` instead of the broker.
 */
export interface FaultProxy {
  readonly host: string;
  readonly port: number;
  /** Adds this much latency to every chunk, in both directions, from now on (0 removes it). Order is kept. */
  delay(ms: number): void;
  /** Holds every byte in both directions (connections stay open) until {@link FaultProxy.resume}. */
  stall(): void;
  /** Forwards what was held during a stall and lets traffic flow again. */
  resume(): void;
  /** Destroys both sockets of every live connection, as a network failure would. New connections are still accepted. */
  cutAll(): number;
  /** Connections open right now. */
  liveConnections(): number;
  /** Connections accepted since the proxy started. */
  acceptedConnections(): number;
  /** Cuts every connection and stops listening. Idempotent. */
  close(): Promise<void>;
}

interface ProxyState {
  delayMs: number;
  stalled: boolean;
}

/** Forwards one direction of one connection, honouring the current delay and stall. */
class Pump {
  private readonly queue: { data: Buffer; dueAt: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private ended = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly state: ProxyState,
  ) {
    from.on("data", (data: Buffer) => {
      // Never release a chunk before the one ahead of it, even if the delay shrank in between.
      const last = this.queue.at(-1)?.dueAt ?? 0;
      this.queue.push({ data, dueAt: Math.max(Date.now() + state.delayMs, last) });
      this.pump();
    });
    from.on("end", () => {
      this.ended = true;
      this.pump();
    });
  }

  pump(): void {
    if (this.timer !== undefined || this.state.stalled) return;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const wait = head.dueAt - Date.now();
      if (wait > 0) {
        this.timer = setTimeout(() => {
          this.timer = undefined;
          this.pump();
        }, wait);
        return;
      }
      this.queue.shift();
      if (this.to.destroyed) return;
      if (!this.to.write(head.data)) {
        this.from.pause();
        this.to.once("drain", () => this.from.resume());
      }
      if (this.state.stalled) return;
    }
    if (this.ended && !this.to.destroyed) this.to.end();
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }
}

interface Link {
  readonly client: Socket;
  readonly upstream: Socket;
  readonly pumps: readonly Pump[];
}

/**
 * Starts a fault-injecting TCP proxy (plain Node `net`, no dependencies) and resolves once it listens.
 */
export async function createFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const state: ProxyState = { delayMs: 0, stalled: false };
  const links = new Set<Link>();
  let accepted = 0;
  let closed = false;

  const destroyLink = (link: Link): void => {
    if (!links.delete(link)) return;
    for (const pump of link.pumps) pump.stop();
    link.client.destroy();
    link.upstream.destroy();
  };

  const server: Server = createServer((client) => {
    accepted += 1;
    const upstream = new Socket();
    const link: Link = {
      client,
      upstream,
      pumps: [new Pump(client, upstream, state), new Pump(upstream, client, state)],
    };
    links.add(link);
    // Any error or close on either side takes the whole connection down, like a real network path.
    for (const socket of [client, upstream]) {
      socket.on("error", () => destroyLink(link));
      socket.on("close", () => destroyLink(link));
    }
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    upstream.connect(options.target.port, options.target.host);
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.listenPort ?? 0, options.listenHost ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;

  const cutAll = (): number => {
    const count = links.size;
    for (const link of [...links]) destroyLink(link);
    return count;
  };

  return {
    host: address.address,
    port: address.port,
    delay(ms) {
      state.delayMs = Math.max(0, ms);
    },
    stall() {
      state.stalled = true;
    },
    resume() {
      state.stalled = false;
      for (const link of links) for (const pump of link.pumps) pump.pump();
    },
    cutAll,
    liveConnections: () => links.size,
    acceptedConnections: () => accepted,
    async close() {
      if (closed) return;
      closed = true;
      cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
