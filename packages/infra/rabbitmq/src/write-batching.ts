import type { ChannelModel } from "amqplib";

/** The parts of amqplib's connection internals this module touches (not in its typings). */
interface MuxInternals {
  _readIncoming?: () => void;
}
interface ConnectionInternals {
  muxer?: MuxInternals;
  stream?: { cork?: () => void; uncork?: () => void };
}

/**
 * Makes one socket write out of each round of frames amqplib sends, instead of one per frame.
 *
 * amqplib queues every frame (a publish, an ack) per channel and, once per event-loop turn, its
 * multiplexer copies them all to the socket with one `write` each. With the socket idle, Node sends
 * each of those writes at once, so a turn that publishes or acks 50 messages makes ~50 system calls
 * (and the broker reads ~50 small segments). Corking the socket for the length of that copy loop
 * and uncorking right after turns them into one `writev`: the same bytes, in the same order, sent in
 * the same event-loop turn, so no delivery guarantee and no latency changes.
 *
 * This reaches into amqplib internals (`connection.muxer._readIncoming`, `connection.stream`); when
 * they are not what is expected (another amqplib version), it does nothing and amqplib writes as usual.
 * Returns whether batching is on.
 */
export function batchSocketWrites(model: ChannelModel): boolean {
  const internals = model.connection as unknown as ConnectionInternals;
  const muxer = internals.muxer;
  const stream = internals.stream;
  const readIncoming = muxer?._readIncoming;
  if (
    muxer === undefined ||
    typeof readIncoming !== "function" ||
    typeof stream?.cork !== "function" ||
    typeof stream.uncork !== "function"
  )
    return false;
  const cork = stream.cork.bind(stream);
  const uncork = stream.uncork.bind(stream);
  muxer._readIncoming = function batched(this: MuxInternals) {
    cork();
    try {
      readIncoming.call(this);
    } finally {
      uncork();
    }
  };
  return true;
}
