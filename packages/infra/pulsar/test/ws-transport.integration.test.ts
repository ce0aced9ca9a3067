import { randomUUID } from "node:crypto";
import { waitFor } from "@factflow/infra-testkit";
import { afterAll, describe, expect, it } from "vitest";
import { adminUrlOf } from "../src/config.js";
import { PulsarRest } from "../src/rest.js";
import type { IncomingMessage } from "../src/transport.js";
import { WsTransport } from "../src/ws-transport.js";
import { PULSAR_URL, pulsarAvailability } from "./helpers.js";

// The WebSocket transport batches the frames of one event-loop turn into one socket write. A
// subscription that stops right after its last handlers settled acknowledges and closes in the same
// turn: the acknowledgements must still reach the broker, or it hands those messages to another
// consumer, which runs them a second time.

const available = await pulsarAvailability();
const place = { tenant: "public", namespace: "default" };
const transport = new WsTransport({
  url: PULSAR_URL,
  ...place,
  connectTimeoutMs: 10_000,
  pingIntervalMs: 5_000,
});
const rest = new PulsarRest({ adminUrl: adminUrlOf(PULSAR_URL), ...place, timeoutMs: 10_000 });
const topics: string[] = [];

afterAll(async () => {
  transport.closeAll();
  for (const topic of topics) await rest.deleteTopic(topic).catch(() => {});
});

function consumerOf(topic: string) {
  return transport.openConsumer(topic, "ack-then-close", {
    subscriptionType: "Shared",
    receiverQueueSize: 100,
    negativeAckRedeliveryDelayMs: 1_000,
  });
}

describe.skipIf(!available.ok)("pulsar WebSocket transport", () => {
  it("delivers the acknowledgements sent in the same turn as the consumer's close", async () => {
    const topic = `ack-close-${randomUUID().slice(0, 8)}`;
    topics.push(topic);
    const first = await consumerOf(topic);
    const producer = await transport.openProducer(topic);
    const count = 20;
    for (let n = 0; n < count; n++)
      await producer.send({ payload: Buffer.from(`m${n}`).toString("base64") }, 10_000);

    const received: IncomingMessage[] = [];
    await new Promise<void>((resolve) => {
      first.onMessage((message) => {
        received.push(message);
        if (received.length === count) resolve();
      });
    });
    for (const message of received) first.ack(message.messageId);
    first.close();

    // A marker after them: once the next consumer has it and the subscription has nothing left,
    // any message whose acknowledgement was lost would have come to that consumer or stayed behind.
    await producer.send({ payload: Buffer.from("marker").toString("base64") }, 10_000);
    const second = await consumerOf(topic);
    const seen: string[] = [];
    second.onMessage((message) => {
      seen.push(Buffer.from(message.payload, "base64").toString());
      second.ack(message.messageId);
    });
    await waitFor(
      async () => {
        const figures = (await rest.subscriptions(topic))?.get("ack-then-close");
        return seen.includes("marker") && figures?.backlog === 0 && figures.unacked === 0;
      },
      { description: "the marker consumed and the subscription empty" },
    );
    second.close();
    producer.close();
    expect(seen).toEqual(["marker"]);
  });
});
