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
export async function handBackAndClose(channel: Channel, queue: string): Promise<void> {
  try {
    channel.nackAll(true);
    await channel.checkQueue(queue);
  } catch {
    // The channel or the queue is already gone; the broker requeues whatever is left by itself.
  }
  await channel.close().catch(() => {});
}
