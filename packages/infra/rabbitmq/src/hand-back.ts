import type { Channel } from "amqplib";

/**
 * Puts every unacked delivery of `channel` back into `queue` and closes the channel, resolving only
 * once they are back.
 *
 * Closing alone requeues them too, but the broker does that after it has answered the close, so a
 * count, a get or an if-empty delete straight after could find the queue briefly empty (seen under
 * load on RabbitMQ 3.10). A reject followed by a passive declare of the same queue on the same
 * channel is ordered on the broker: once the declare answers, the deliveries are ready again.
 */
export async function handBackAndClose(channel: Channel, queue: string, readyAtLeast = 0): Promise<void> {
  try {
    await handBack(channel, queue, readyAtLeast);
  } catch {
    // The channel or the queue is already gone; the broker requeues whatever is left by itself.
  }
  await channel.close().catch(() => {});
}

/** How long {@link handBack} waits for the broker to show the returned deliveries as ready. */
const HAND_BACK_WAIT_MS = 10_000;

/**
 * Puts every unacked delivery of `channel` back into `queue`, keeping the channel open. With
 * `readyAtLeast`, also waits (bounded) until the queue counts that many ready messages: a hand-back
 * of thousands of deliveries is not always done when the declare answers (seen on RabbitMQ with
 * a few thousand dead letters), and a reader that counts or fetches right after must see them all.
 */
export async function handBack(channel: Channel, queue: string, readyAtLeast = 0): Promise<void> {
  channel.nackAll(true);
  let ready = (await channel.checkQueue(queue)).messageCount;
  const deadline = Date.now() + HAND_BACK_WAIT_MS;
  while (ready < readyAtLeast && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    ready = (await channel.checkQueue(queue)).messageCount;
  }
}
