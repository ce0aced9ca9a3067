import { Headers } from "@factflow/protocols";
import type { SettlementCopy } from "@factflow/provider-kit";
import type { Message } from "amqplib";
import { type EncodedMessage, stringHeaders } from "./envelope-codec.js";
import { retryQueueName } from "./naming.js";
import type { Publisher } from "./publisher.js";
import type { Topology } from "./topology.js";

/** Where a failed delivery of one subscription goes. */
export interface FailureRoute {
  /** The protocol destination the subscription consumes. */
  readonly destination: string;
  readonly subscription: string;
  readonly kind: "queue" | "topic";
  /** The AMQP queue consumed (a topic subscription's own queue). */
  readonly sourceQueue: string;
  readonly deadLetterQueue: string;
}

/**
 * A copy of a received message for re-publishing, keeping its ids, body and priority, with its
 * headers rewritten by `rewrite` (one of the kit's builders: `retryHeaders`, `deadLetterHeaders`,
 * `redriveHeaders`). The AMQP header table is read as strings first (`stringHeaders`), so the
 * builders see the same headers they see on every other broker.
 */
export function amqpCopy(
  message: Message,
  rewrite: (headers: Record<string, string>) => Record<string, string>,
): EncodedMessage {
  const headers = rewrite(stringHeaders(message));
  const props = message.properties;
  // The ids travel as AMQP properties, not headers.
  const id = headers[Headers.messageId] ?? (typeof props.messageId === "string" ? props.messageId : "");
  const correlationId =
    headers[Headers.correlationId] ?? (typeof props.correlationId === "string" ? props.correlationId : id);
  delete headers[Headers.messageId];
  delete headers[Headers.correlationId];
  const priority = props.priority;
  return typeof priority === "number" && priority > 0
    ? { id, correlationId, content: message.content, headers, priority }
    : { id, correlationId, content: message.content, headers };
}

/**
 * Publishes a failed delivery's retry or dead-letter copy, as the kit's runtime asks: the same body,
 * ids and priority with the copy's headers. A retry goes into the holding queue of its delay (one
 * queue per distinct delay, so a short delay never waits behind a long one at the queue head), which
 * dead-letters it back to the source queue; a dead letter goes to the dead-letter queue. Resolves
 * once the broker confirmed the copy.
 */
export async function publishCopy(
  publisher: Publisher,
  topology: Topology,
  route: FailureRoute,
  message: Message,
  copy: SettlementCopy,
): Promise<void> {
  const encoded = amqpCopy(message, () => ({ ...copy.headers }));
  const delay = copy.kind === "retry" ? copy.verdict.delayMs : 0;
  let routingKey = route.sourceQueue;
  let describe = route.destination;
  if (copy.kind === "dead") {
    routingKey = route.deadLetterQueue;
    describe = `${route.destination} (dead letters)`;
    await topology.ensureQueue(routingKey, describe);
  } else if (delay > 0) {
    routingKey = retryQueueName(route.sourceQueue, delay);
    describe = `${route.destination} (retry in ${delay} ms)`;
    await topology.declareHoldingQueue(routingKey, delay, "", route.sourceQueue);
  }
  await publisher.publish({ exchange: "", routingKey, mandatory: true, describe }, encoded);
}
