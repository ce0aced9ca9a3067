import { createRabbitMqProvider, type RabbitMqProvider } from "@factflow/infra-rabbitmq";
import amqp, { type ConfirmChannel, type ConsumeMessage } from "amqplib";
import { createEngineRelayMode, type SelfTimedMode } from "./_engine-relay.js";
import { providerRelayMode, SENT_HEADER } from "./_provider-relay.js";
import { type RelayMode, runRelayBench } from "./_relay-harness.js";

const URL_DEFAULT = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
/** Deliveries each hop may hold unsettled, and handlers each hop runs at once (same for every mode). */
const PREFETCH = 50;

function confirmOf(
  channel: ConfirmChannel,
  queue: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<void> {
  return new Promise((resolve, reject) => {
    channel.sendToQueue(queue, body, { persistent: true, contentType: "application/json", headers }, (err) =>
      err ? reject(err) : resolve(),
    );
  });
}

/** The baseline: plain amqplib, one channel per hop consumer, one confirm channel for publishing. */
export const rawAmqplibMode: RelayMode = {
  name: "raw-amqplib",
  async start(url, queues, sink) {
    const connection = await amqp.connect(url);
    const publisher = await connection.createConfirmChannel();
    const setup = await connection.createChannel();
    for (const q of queues) await setup.assertQueue(q, { durable: true });
    await setup.close();
    for (let i = 0; i < queues.length; i++) {
      const channel = await connection.createChannel();
      await channel.prefetch(PREFETCH);
      const next = queues[i + 1];
      await channel.consume(queues[i]!, (message: ConsumeMessage | null) => {
        if (message === null) return;
        const sent = Number(message.properties.headers?.[SENT_HEADER]);
        sink.hop(Date.now() - sent);
        if (next === undefined) {
          sink.arrived();
          channel.ack(message);
          return;
        }
        confirmOf(publisher, next, message.content, { [SENT_HEADER]: String(Date.now()) }).then(
          () => channel.ack(message),
          () => channel.nack(message, false, true),
        );
      });
    }
    return {
      inject: (index) =>
        confirmOf(publisher, queues[0]!, Buffer.from(JSON.stringify({ index })), {
          [SENT_HEADER]: String(Date.now()),
        }),
      async close() {
        const cleanup = await connection.createChannel();
        for (const q of queues) await cleanup.deleteQueue(q).catch(() => {});
        await connection.close();
      },
    };
  },
};

/** The relay through Factflow's provider. */
export const providerMode: RelayMode = providerRelayMode(
  {
    create: (url) => createRabbitMqProvider({ url }),
    cleanup: (url, provider) => deleteDeclaredQueues(url, provider),
  },
  PREFETCH,
);

/** Deletes the queues a (closed) provider declared, on a fresh connection. */
async function deleteDeclaredQueues(url: string, provider: RabbitMqProvider): Promise<void> {
  const connection = await amqp.connect(url);
  const channel = await connection.createChannel();
  for (const q of provider.declaredNames().queues) await channel.deleteQueue(q).catch(() => {});
  await connection.close();
}

/**
 * The relay as a Factflow pipeline through the engine over the provider, lineage on PostgreSQL.
 * `strictLineage: false` is a diagnosis only (sound here because one process publishes and
 * consumes): it shows what the durable commit before each hop costs.
 */
function engineMode(url: string, strictLineage = true): SelfTimedMode {
  return createEngineRelayMode(
    {
      create: () => createRabbitMqProvider({ url }),
      cleanup: (provider) => deleteDeclaredQueues(url, provider),
    },
    { prefetch: PREFETCH, strictLineage, ...(strictLineage ? {} : { name: "engine+lineage-relaxed" }) },
  );
}

/** The raw-client baseline first, then the provider; the harness adds the engine mode. */
export const RELAY_MODES: RelayMode[] = [rawAmqplibMode, providerMode];

/** `run([N, rounds])`: see {@link runRelayBench}. */
export function run(args: string[]): Promise<void> {
  return runRelayBench(args, {
    bench: "rabbitmq",
    url: URL_DEFAULT,
    relayModes: RELAY_MODES,
    engineMode,
    broker: (comm) => comm === "beam.smp",
  });
}
