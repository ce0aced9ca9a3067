import type { MessageEnvelope } from "@factflow/protocols";
import type { SettlementCopy } from "@factflow/provider-kit";
import { DLQ_ID_HEADER, sendHeaders } from "./envelope-codec.js";
import {
  type ArtemisTarget,
  consumedQueueName,
  deadLetterQueueName,
  subscribeDestination,
} from "./naming.js";
import type { StompLink } from "./stomp-link.js";

/** Runs after a settlement copy has its RECEIPT and before the original is acknowledged. */
export type CopyConfirmed = (info: {
  readonly destination: string;
  readonly what: string;
}) => void | Promise<void>;

/**
 * SENDs a delivery's retry or dead-letter copy, as the kit's runtime asks, and resolves on its
 * RECEIPT. A retry goes back to the consumed queue (a topic subscription's own queue, through its
 * address) with the broker scheduling its delay; a dead letter goes to the subscription's anycast
 * dead-letter queue, with the message id again under a name Artemis selectors can match, so admin
 * calls can pick one dead letter.
 */
export async function sendSettlementCopy(
  link: StompLink,
  target: ArtemisTarget,
  subscription: string,
  envelope: MessageEnvelope,
  copy: SettlementCopy,
  hooks: { readonly afterCopyConfirmed?: CopyConfirmed },
): Promise<"confirmed"> {
  let destination = deadLetterQueueName(target, subscription);
  let routing: "ANYCAST" | "MULTICAST" = "ANYCAST";
  let headers = copy.headers;
  let delayMs = 0;
  let what = "dead letter";
  if (copy.kind === "retry") {
    if (target.kind === "topic") {
      destination = subscribeDestination(target, subscription);
      routing = "MULTICAST";
    } else {
      destination = consumedQueueName(target, subscription);
    }
    delayMs = copy.verdict.delayMs;
    // The name `afterCopyConfirmed` sees: the retry of an attempt that did not complete is a redelivery.
    what = copy.verdict.incomplete ? "redelivery" : "retry";
  } else {
    headers = { ...headers, [DLQ_ID_HEADER]: envelope.id };
  }
  const body = JSON.stringify(envelope.body);
  await link.send(destination, sendHeaders({ headers, delayMs }, routing), body, `${what} of ${envelope.id}`);
  await hooks.afterCopyConfirmed?.({ destination, what });
  return "confirmed";
}
