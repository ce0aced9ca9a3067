import { type DeadLetterReason, Headers, type RetryPolicy, retryDelayMs } from "@factflow/protocols";
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

/** Longest `x-last-error` kept, so a huge stack trace cannot blow the header table. */
const MAX_ERROR_TEXT = 1000;

/** A copy of a received message for re-publishing, keeping its ids, body and priority. */
function copyOf(message: Message, headers: Record<string, string>): EncodedMessage {
  const props = message.properties;
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
 * Publishes the next attempt of a failed delivery: the same body and headers with
 * `x-delivery-attempt` + 1, into the holding queue of its delay (one queue per distinct delay, so a
 * short delay never waits behind a long one at the queue head), which dead-letters it back to the
 * source queue. Resolves once the broker confirmed the copy.
 */
export async function publishRetry(
  publisher: Publisher,
  topology: Topology,
  route: FailureRoute,
  message: Message,
  attempt: number,
  policy: RetryPolicy,
  reason: string | undefined,
): Promise<number> {
  const headers = stringHeaders(message);
  headers[Headers.deliveryAttempt] = String(attempt + 1);
  if (reason !== undefined) headers[Headers.lastError] = reason.slice(0, MAX_ERROR_TEXT);
  const delay = retryDelayMs(policy, attempt + 1);
  if (delay <= 0) {
    await publisher.publish(
      { exchange: "", routingKey: route.sourceQueue, mandatory: true, describe: route.destination },
      copyOf(message, headers),
    );
    return 0;
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
    copyOf(message, headers),
  );
  return delay;
}

/** Publishes a failed delivery to its dead-letter queue with the failure headers; resolves once confirmed. */
export async function publishDeadLetter(
  publisher: Publisher,
  topology: Topology,
  route: FailureRoute,
  message: Message,
  why: DeadLetterReason,
  lastError: string | undefined,
): Promise<void> {
  const headers = stringHeaders(message);
  headers[Headers.deadLetterReason] = why;
  headers[Headers.originalDestination] = route.destination;
  if (route.kind === "topic") headers[Headers.originalSubscription] = route.subscription;
  headers[Headers.deadLetteredAt] = new Date().toISOString();
  if (lastError !== undefined) headers[Headers.lastError] = lastError.slice(0, MAX_ERROR_TEXT);
  await topology.ensureQueue(route.deadLetterQueue, `${route.destination} (dead letters)`);
  await publisher.publish(
    {
      exchange: "",
      routingKey: route.deadLetterQueue,
      mandatory: true,
      describe: `${route.destination} (dead letters)`,
    },
    copyOf(message, headers),
  );
}

/** Headers a redriven message sheds: it starts over with a fresh budget. */
export function redrivenHeaders(message: Message): Record<string, string> {
  const headers = stringHeaders(message);
  for (const key of [
    Headers.deadLetterReason,
    Headers.deadLetteredAt,
    Headers.originalSubscription,
    Headers.lastError,
  ]) {
    delete headers[key];
  }
  delete headers[Headers.originalDestination];
  headers[Headers.deliveryAttempt] = "1";
  return headers;
}

export { copyOf as amqpCopyOf };
