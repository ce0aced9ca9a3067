import { type DeadLetterReason, Headers } from "@factflow/protocols";
import { deadLetterHeaders, retryHeaders } from "@factflow/provider-kit";
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
 * Publishes the next attempt of a failed delivery, as the kit's verdict says: the same body and
 * headers with `x-delivery-attempt` = `nextAttempt`, into the holding queue of `delayMs` (one queue
 * per distinct delay, so a short delay never waits behind a long one at the queue head), which
 * dead-letters it back to the source queue. Resolves once the broker confirmed the copy.
 */
export async function publishRetry(
  publisher: Publisher,
  topology: Topology,
  route: FailureRoute,
  message: Message,
  retry: { readonly nextAttempt: number; readonly delayMs: number; readonly lastError: string },
): Promise<void> {
  const copy = amqpCopy(message, (headers) => retryHeaders(headers, retry.nextAttempt, retry.lastError));
  const delay = retry.delayMs;
  if (delay <= 0) {
    await publisher.publish(
      { exchange: "", routingKey: route.sourceQueue, mandatory: true, describe: route.destination },
      copy,
    );
    return;
  }
  const holding = retryQueueName(route.sourceQueue, delay);
  await topology.declareHoldingQueue(holding, delay, "", route.sourceQueue);
  await publisher.publish(
    {
      exchange: "",
      routingKey: holding,
      mandatory: true,
      describe: `${route.destination} (retry in ${delay} ms)`,
    },
    copy,
  );
}

/** Publishes a failed delivery to its dead-letter queue with the failure headers; resolves once confirmed. */
export async function publishDeadLetter(
  publisher: Publisher,
  topology: Topology,
  route: FailureRoute,
  message: Message,
  reason: DeadLetterReason,
  lastError: string | undefined,
): Promise<void> {
  const origin =
    route.kind === "topic"
      ? { destination: route.destination, subscription: route.subscription }
      : { destination: route.destination };
  const copy = amqpCopy(message, (headers) => deadLetterHeaders(headers, reason, origin, lastError));
  await topology.ensureQueue(route.deadLetterQueue, `${route.destination} (dead letters)`);
  await publisher.publish(
    {
      exchange: "",
      routingKey: route.deadLetterQueue,
      mandatory: true,
      describe: `${route.destination} (dead letters)`,
    },
    copy,
  );
}
