import { ProviderError } from "@factflow/protocols";
import type { IMessage } from "@stomp/stompjs";
import type { StompLink } from "./stomp-link.js";

/**
 * Consumes up to `expected` messages of `queue` (optionally matching `selector`) in order and hands
 * each to `visit`; the ones it returns true for are acknowledged, the rest go back to the queue
 * when the consumer closes. Returns how many were acknowledged.
 */
export async function consumeQueue(
  link: StompLink,
  timeoutMs: number,
  queue: string,
  selector: string | undefined,
  expected: number,
  visit: (message: IMessage) => Promise<boolean>,
): Promise<number> {
  const arrived: IMessage[] = [];
  let wake: (() => void) | undefined;
  const subscription = await link.subscribe(
    queue,
    {
      ack: "client-individual",
      "subscription-type": "ANYCAST",
      "consumer-window-size": "-1",
      ...(selector === undefined ? {} : { selector }),
    },
    (message) => {
      arrived.push(message);
      wake?.();
    },
  );
  let acked = 0;
  const deadline = Date.now() + timeoutMs;
  try {
    for (let seen = 0; seen < expected; seen++) {
      while (arrived.length <= seen) {
        const left = deadline - Date.now();
        if (left <= 0) return acked;
        await new Promise<void>((resolve) => {
          wake = resolve;
          setTimeout(resolve, Math.min(left, 250));
        });
        wake = undefined;
      }
      const message = arrived[seen] as IMessage;
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
