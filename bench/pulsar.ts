import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { createPulsarProvider, resolveDestination } from "@factflow/infra-pulsar";
import WebSocket from "ws";
import { createEngineRelayMode, type SelfTimedMode } from "./_engine-relay.js";
import { providerRelayMode, SENT_HEADER } from "./_provider-relay.js";
import { type RelayMode, runRelayBench } from "./_relay-harness.js";

/** `PULSAR_URL`, else what `scripts/services/pulsar.sh` recorded, else the standalone default. */
function pulsarUrl(): string {
  if (process.env.PULSAR_URL !== undefined) return process.env.PULSAR_URL;
  const base = process.env.FACTFLOW_SERVICES_DIR ?? join(homedir(), ".cache", "factflow", "services");
  const file = join(base, "pulsar", "ws.url");
  return existsSync(file) ? readFileSync(file, "utf8").trim() : "ws://127.0.0.1:8080";
}

const URL_DEFAULT = pulsarUrl();
const NAMESPACE = "public/default";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;

const adminOf = (url: string) => url.replace(/^ws/, "http");

/** Opens a WebSocket and waits for it. */
function open(url: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once("open", () => resolve(ws));
    ws.once("error", reject);
  });
}

/** A raw producer: one socket, send replies matched by context. */
async function rawProducer(url: string, topic: string) {
  const ws = await open(`${url}/ws/v2/producer/persistent/${NAMESPACE}/${topic}`);
  const pending = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
  let next = 0;
  ws.on("message", (data) => {
    const reply = JSON.parse(String(data)) as { result: string; context: string };
    const entry = pending.get(reply.context);
    pending.delete(reply.context);
    if (reply.result === "ok") entry?.resolve();
    else entry?.reject(new Error(`send failed: ${String(data)}`));
  });
  return {
    send(payload: string, properties: Record<string, string>): Promise<void> {
      next += 1;
      const context = String(next);
      return new Promise((resolve, reject) => {
        pending.set(context, { resolve, reject });
        ws.send(JSON.stringify({ payload, properties, context }));
      });
    },
    close: () => ws.terminate(),
  };
}

async function deleteTopics(url: string, topics: readonly string[]): Promise<void> {
  for (const topic of topics) {
    await fetch(`${adminOf(url)}/admin/v2/persistent/${NAMESPACE}/${topic}?force=true`, {
      method: "DELETE",
    }).catch(() => {});
  }
}

/**
 * The baseline: plain `ws` on Pulsar's WebSocket API, a Shared-subscription consumer per hop
 * (push mode, receiver queue = PREFETCH) and a producer per topic; each hop forwards, waits for the
 * broker's send reply, then acks.
 */
export const rawWsMode: RelayMode = {
  name: "raw-ws",
  async start(url, queues, sink) {
    const sockets: { close(): void }[] = [];
    const producers = [];
    for (const q of queues) {
      const p = await rawProducer(url, q);
      producers.push(p);
      sockets.push(p);
    }
    for (let i = 0; i < queues.length; i++) {
      const consumer = await open(
        `${url}/ws/v2/consumer/persistent/${NAMESPACE}/${queues[i]}/bench?subscriptionType=Shared&receiverQueueSize=${PREFETCH}`,
      );
      sockets.push({ close: () => consumer.terminate() });
      const next = producers[i + 1];
      consumer.on("message", (data) => {
        const message = JSON.parse(String(data)) as {
          messageId: string;
          payload: string;
          properties: Record<string, string>;
        };
        sink.hop(Date.now() - Number(message.properties[SENT_HEADER]));
        const ack = () => consumer.send(JSON.stringify({ messageId: message.messageId }));
        if (next === undefined) {
          sink.arrived();
          ack();
          return;
        }
        next
          .send(message.payload, { [SENT_HEADER]: String(Date.now()) })
          .then(ack, () =>
            consumer.send(JSON.stringify({ type: "negativeAcknowledge", messageId: message.messageId })),
          );
      });
    }
    const first = producers[0]!;
    return {
      inject: (index) =>
        first.send(Buffer.from(JSON.stringify({ index })).toString("base64"), {
          [SENT_HEADER]: String(Date.now()),
        }),
      async close() {
        for (const s of sockets) s.close();
        await deleteTopics(url, queues);
      },
    };
  },
};

/** Deletes every topic a relay of the provider used (queue topics and their dead-letter topics). */
async function deleteProviderTopics(url: string, queues: readonly string[]): Promise<void> {
  const topics = queues.map((q) => resolveDestination(`/queue/${q}`).topic);
  await deleteTopics(url, [...topics, ...topics.map((t) => `${t}-dlq`)]);
}

/** The relay through Factflow's provider. */
export const providerMode: RelayMode = providerRelayMode(
  {
    create: (url) => createPulsarProvider({ url }),
    cleanup: (url, _provider, queues) => deleteProviderTopics(url, queues),
  },
  PREFETCH,
);

/** The relay as a Factflow pipeline through the engine over the provider, lineage on PostgreSQL. */
function engineMode(url: string, strictLineage = true): SelfTimedMode {
  return createEngineRelayMode(
    {
      create: () => createPulsarProvider({ url }),
      cleanup: async (_provider, destinations) => {
        const topics = destinations.map((d) => resolveDestination(d).topic);
        await deleteTopics(url, [...topics, ...topics.map((t) => `${t}-dlq`)]);
      },
    },
    { prefetch: PREFETCH, strictLineage, ...(strictLineage ? {} : { name: "engine+lineage-relaxed" }) },
  );
}

/** The raw-client baseline first, then the provider; the harness adds the engine mode. */
export const RELAY_MODES: RelayMode[] = [rawWsMode, providerMode];

/** `run([N, rounds])`: see `runRelayBench` in `_relay-harness.ts`. */
export function run(args: string[]): Promise<void> {
  return runRelayBench(args, {
    bench: "pulsar",
    url: URL_DEFAULT,
    relayModes: RELAY_MODES,
    engineMode,
    broker: (comm, cmdline) => comm === "java" && cmdline.includes("pulsar"),
  });
}
