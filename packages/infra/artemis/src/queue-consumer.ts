import { ProviderError } from "@factflow/protocols";
import type { IMessage } from "@stomp/stompjs";
import type { StompLink } from "./stomp-link.js";

let readProbe: ((message: IMessage) => void) | undefined;

/**
 * Calls `probe` with every message {@link consumeQueue} receives (undefined stops it). Lets a test
 * check how many messages stay reachable while an admin operation reads a queue.
 */
export function observeQueueReads(probe: ((message: IMessage) => void) | undefined): void {
  readProbe = probe;
}

/**
 * Consumes up to `expected` messages of `queue` (optionally matching `selector`) in order and hands
 * each to `visit`; the ones it returns true for are acknowledged, the rest go back to the queue
 * when the consumer closes. Returns how many were acknowledged. Gives up (answering the count so
 * far) when no message came for `timeoutMs`.
 *
 * A message is dropped once `visit` has returned, so what stays in memory is what `visit` keeps plus
 * what the broker sent ahead: with `windowBytes` (Artemis' `consumer-window-size`, credit returned
 * as messages are acknowledged) about that many bytes; without it, no limit, which suits a read
 * that acknowledges nothing and visits synchronously (each network read is handled before the
 * next), never one that waits on the network per message.
 */
export async function consumeQueue(
  link: StompLink,
  timeoutMs: number,
  queue: string,
  selector: string | undefined,
  expected: number,
  visit: (message: IMessage) => Promise<boolean>,
  windowBytes = -1,
): Promise<number> {
  const arrived: IMessage[] = [];
  let wake: (() => void) | undefined;
  const subscription = await link.subscribe(
    queue,
    {
      ack: "client-individual",
      "subscription-type": "ANYCAST",
      "consumer-window-size": String(windowBytes),
      ...(selector === undefined ? {} : { selector }),
    },
    (message) => {
      readProbe?.(message);
      arrived.push(message);
      wake?.();
    },
  );
  let acked = 0;
  // A deadline for the next message, not for the whole read: a large queue takes as long as it takes
  // while messages keep coming.
  try {
    for (let seen = 0; seen < expected; seen++) {
      const deadline = Date.now() + timeoutMs;
      while (arrived.length === 0) {
        const left = deadline - Date.now();
        if (left <= 0) return acked;
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, Math.min(left, 250));
        });
        wake = undefined;
      }
      const message = arrived.shift() as IMessage;
      if (await visit(message)) {
        const ackId = message.headers.ack ?? message.headers["message-id"] ?? "";
        if (subscription.generation !== link.generation || !link.ack(ackId, subscription.id)) {
          throw new ProviderError(
            "artemis",
            "connection",
            "admin: the connection dropped mid-operation; retry it",
          );
        }
        acked += 1;
      }
    }
    return acked;
  } finally {
    await subscription.unsubscribe();
  }
}
