/**
 * `pnpm bench artemis [N] [rounds]`: a 3-hop relay (q1 → q2 → q3 → sink) of N messages through
 * ActiveMQ Artemis over STOMP (`bash scripts/services/artemis.sh start` first; `ARTEMIS_STOMP_URL`
 * overrides the broker).
 *
 * Modes, all in one run against the same broker, with the same durability (persistent SENDs, each
 * with a receipt; `client-individual` ACK of a delivery only after the next hop's RECEIPT) and the
 * same consumer window:
 * - `raw-stompjs`: hand-written @stomp/stompjs code, the baseline;
 * - `provider`: the same relay through `@factflow/infra-artemis` handlers.
 *
 * Prints one JSON line per mode: msgs/s, p50/p99 hop latency, ratio to the baseline.
 */
import { randomUUID } from "node:crypto";
import { createArtemisProvider } from "@factflow/infra-artemis";
import type { HandlerResult } from "@factflow/protocols";
import { Client, type IMessage } from "@stomp/stompjs";
import { TCPWrapper } from "@stomp/tcp-wrapper";

const URL_DEFAULT = process.env.ARTEMIS_STOMP_URL ?? "stomp://127.0.0.1:61613";
const SENT_HEADER = "x-bench-sent";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;
/** The provider's consumer window for PREFETCH (prefetch × prefetchBytesPerMessage); the raw mode uses the same. */
const WINDOW_BYTES = PREFETCH * 2048;
/** Publishes of the injector awaiting their receipt at once. */
const INJECT_WINDOW = 100;

interface RelaySink {
  arrived(): void;
  hop(ms: number): void;
}

interface RelayRun {
  inject(index: number): Promise<void>;
  close(): Promise<void>;
}

interface RelayMode {
  readonly name: string;
  start(url: string, queues: readonly string[], sink: RelaySink): Promise<RelayRun>;
}

async function connectRaw(url: string): Promise<Client> {
  const { hostname, port } = new URL(url);
  const client = new Client({
    webSocketFactory: () => new TCPWrapper(hostname, Number(port || 61613)),
    heartbeatIncoming: 5_000,
    heartbeatOutgoing: 5_000,
    reconnectDelay: 0,
    debug: () => {},
  });
  await new Promise<void>((resolve, reject) => {
    client.onConnect = () => resolve();
    client.onStompError = (frame) => reject(new Error(frame.headers.message ?? "STOMP ERROR"));
    client.onWebSocketError = () => reject(new Error(`cannot reach ${url}; start the broker first`));
    client.activate();
  });
  return client;
}

/** SEND with a receipt; resolves on the RECEIPT. */
function sendWithReceipt(
  client: Client,
  queue: string,
  body: string,
  headers: Record<string, string>,
): Promise<void> {
  const receipt = randomUUID();
  return new Promise((resolve) => {
    client.watchForReceipt(receipt, () => resolve());
    client.publish({
      destination: queue,
      body,
      headers: { ...headers, receipt, persistent: "true", "destination-type": "ANYCAST" },
    });
  });
}

/**
 * The baseline: plain stompjs on one connection, one subscription per hop, at most PREFETCH
 * deliveries of a hop being relayed at once (what the provider's `concurrency` means).
 */
const rawStompMode: RelayMode = {
  name: "raw-stompjs",
  async start(url, queues, sink) {
    const client = await connectRaw(url);
    for (let i = 0; i < queues.length; i++) {
      const next = queues[i + 1];
      const waiting: IMessage[] = [];
      let active = 0;
      const relay = (message: IMessage): void => {
        active += 1;
        sink.hop(Date.now() - Number(message.headers[SENT_HEADER]));
        const forwarded =
          next === undefined
            ? Promise.resolve(sink.arrived())
            : sendWithReceipt(client, next, message.body, { [SENT_HEADER]: String(Date.now()) });
        void forwarded.then(() => {
          message.ack();
          active -= 1;
          const queued = waiting.shift();
          if (queued !== undefined) relay(queued);
        });
      };
      client.subscribe(
        queues[i] as string,
        (message: IMessage) => {
          if (active < PREFETCH) relay(message);
          else waiting.push(message);
        },
        {
          ack: "client-individual",
          "subscription-type": "ANYCAST",
          "consumer-window-size": String(WINDOW_BYTES),
        },
      );
    }
    return {
      inject: (index) =>
        sendWithReceipt(client, queues[0] as string, JSON.stringify({ index }), {
          [SENT_HEADER]: String(Date.now()),
        }),
      close: () => client.deactivate(),
    };
  },
};

/** The relay through Factflow's provider: each hop is a subscription whose handler publishes onward. */
const providerMode: RelayMode = {
  name: "provider",
  async start(url, queues, sink) {
    const provider = createArtemisProvider({ url });
    await provider.connect();
    const destinations = queues.map((q) => `/queue/${q}`);
    for (let i = 0; i < destinations.length; i++) {
      const next = destinations[i + 1];
      await provider.subscribe(
        destinations[i] as string,
        async (delivery): Promise<HandlerResult> => {
          sink.hop(Date.now() - Number(delivery.message.headers[SENT_HEADER]));
          if (next === undefined) {
            sink.arrived();
            return "ACKNOWLEDGED";
          }
          await provider.publish(next, {
            body: delivery.message.body,
            headers: { [SENT_HEADER]: String(Date.now()) },
          });
          return "ACKNOWLEDGED";
        },
        { subscription: `hop-${i}`, prefetch: PREFETCH, concurrency: PREFETCH },
      );
    }
    return {
      inject: (index) =>
        provider
          .publish(destinations[0] as string, {
            body: { index },
            headers: { [SENT_HEADER]: String(Date.now()) },
          })
          .then(() => {}),
      close: () => provider.close(),
    };
  },
};

const RELAY_MODES: RelayMode[] = [rawStompMode, providerMode];

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

async function destroyQueues(url: string, queues: readonly string[]): Promise<void> {
  const admin = createArtemisProvider({ url });
  await admin.connect();
  for (const q of queues) await admin.destroy(`/queue/${q}`).catch(() => {});
  await admin.close();
}

async function measure(mode: RelayMode, url: string, n: number) {
  const tag = randomUUID().slice(0, 8);
  const queues = ["q1", "q2", "q3", "sink"].map((q) => `bench-${tag}-${mode.name}-${q}`);
  const hops: number[] = [];
  let arrived = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const relay = await mode.start(url, queues, {
    arrived() {
      arrived += 1;
      if (arrived === n) done();
    },
    hop(ms) {
      hops.push(ms);
    },
  });
  const started = performance.now();
  try {
    let nextIndex = 0;
    const injector = async () => {
      while (nextIndex < n) await relay.inject(nextIndex++);
    };
    await Promise.all(Array.from({ length: Math.min(INJECT_WINDOW, n) }, injector));
    await all;
  } finally {
    await relay.close();
    await destroyQueues(url, queues);
  }
  const seconds = (performance.now() - started) / 1000;
  hops.sort((a, b) => a - b);
  return { msgsPerSec: n / seconds, p50: percentile(hops, 50), p99: percentile(hops, 99) };
}

/**
 * `run([N, rounds])`: N messages per relay (default 2000); every mode runs `rounds` times (default
 * 3), interleaved, and the median round of each mode is reported.
 */
export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 2000);
  const rounds = Number(args[1] ?? 3);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] artemis: N must be a positive integer, got "${args[0]}"`);
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new Error(`[factflow/bench] artemis: rounds must be a positive integer, got "${args[1]}"`);
  const url = URL_DEFAULT;
  for (const mode of RELAY_MODES) await measure(mode, url, Math.min(200, n));
  const results = new Map<string, Awaited<ReturnType<typeof measure>>[]>();
  for (let round = 0; round < rounds; round++) {
    for (const mode of RELAY_MODES) {
      const list = results.get(mode.name) ?? [];
      list.push(await measure(mode, url, n));
      results.set(mode.name, list);
    }
  }
  const baselineName = (RELAY_MODES[0] as RelayMode).name;
  const baseline = median((results.get(baselineName) ?? []).map((r) => r.msgsPerSec));
  for (const mode of RELAY_MODES) {
    const list = results.get(mode.name) ?? [];
    const rate = median(list.map((r) => r.msgsPerSec));
    console.log(
      JSON.stringify({
        bench: "artemis",
        mode: mode.name,
        n,
        rounds,
        hops: 3,
        msgsPerSec: Math.round(rate),
        hopP50Ms: Number(median(list.map((r) => r.p50)).toFixed(2)),
        hopP99Ms: Number(median(list.map((r) => r.p99)).toFixed(2)),
        ratioVsRaw: Number((rate / baseline).toFixed(3)),
        baseline: baselineName,
        roundsMsgsPerSec: list.map((r) => Math.round(r.msgsPerSec)),
      }),
    );
  }
}
