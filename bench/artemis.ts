/**
 * `pnpm bench artemis [N] [rounds]`: a 3-hop relay (q1 → q2 → q3 → sink) of N messages through
 * ActiveMQ Artemis over STOMP (`bash scripts/services/artemis.sh start` first; `ARTEMIS_STOMP_URL`
 * overrides the broker).
 *
 * Modes, all in one run against the same broker, with the same durability (persistent SENDs, each
 * with a receipt; `client-individual` ACK of a delivery only after the next hop's RECEIPT) and the
 * same consumer window:
 * - `raw-stompjs`: hand-written @stomp/stompjs code, the baseline;
 * - `provider`: the same relay through `@factflow/infra-artemis` handlers (engine and lineage off);
 * - `engine+lineage`: the same relay as a Factflow pipeline run by `@factflow/engine` over the
 *   provider, lineage on PostgreSQL with `strictLineage` (see `bench/_engine-relay.ts` for how it is
 *   seeded and timed).
 *
 * Prints one JSON line per mode: msgs/s, p50/p99 hop latency, ratio to the baseline.
 */
import { randomUUID } from "node:crypto";
import { createArtemisProvider } from "@factflow/infra-artemis";
import { Client, type IMessage } from "@stomp/stompjs";
import { TCPWrapper } from "@stomp/tcp-wrapper";
import { createEngineRelayMode, type SelfTimedMode } from "./_engine-relay.js";
import { providerRelayMode, SENT_HEADER } from "./_provider-relay.js";
import { type RelayMode, runRelayBench } from "./_relay-harness.js";

const URL_DEFAULT = process.env.ARTEMIS_STOMP_URL ?? "stomp://127.0.0.1:61613";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;
/** The provider's consumer window for PREFETCH (prefetch × prefetchBytesPerMessage); the raw mode uses the same. */
const WINDOW_BYTES = PREFETCH * 2048;

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

/** The relay through Factflow's provider. */
const providerMode: RelayMode = providerRelayMode(
  { create: (url) => createArtemisProvider({ url }) },
  PREFETCH,
);

/** Destroys `/queue/...` destinations (and their dead letters) on a fresh connection. */
async function destroyDestinations(url: string, destinations: readonly string[]): Promise<void> {
  const admin = createArtemisProvider({ url });
  await admin.connect();
  for (const destination of destinations) await admin.destroy(destination).catch(() => {});
  await admin.close();
}

function destroyQueues(url: string, queues: readonly string[]): Promise<void> {
  return destroyDestinations(
    url,
    queues.map((q) => `/queue/${q}`),
  );
}

/**
 * The relay as a Factflow pipeline through the engine over the provider, lineage on PostgreSQL.
 * `strictLineage: false` is a diagnosis only (sound here because one process publishes and
 * consumes): it shows what the durable commit before each hop costs.
 */
function engineMode(url: string, strictLineage = true): SelfTimedMode {
  return createEngineRelayMode(
    {
      create: () => createArtemisProvider({ url }),
      cleanup: (_provider, destinations) => destroyDestinations(url, destinations),
    },
    { prefetch: PREFETCH, strictLineage, ...(strictLineage ? {} : { name: "engine+lineage-relaxed" }) },
  );
}

/** `run([N, rounds])`: see {@link runRelayBench}. */
export function run(args: string[]): Promise<void> {
  return runRelayBench(args, {
    bench: "artemis",
    url: URL_DEFAULT,
    relayModes: [rawStompMode, providerMode],
    engineMode,
    cleanup: (queues) => destroyQueues(URL_DEFAULT, queues),
    broker: (comm, cmdline) => comm === "java" && cmdline.includes("artemis"),
  });
}
