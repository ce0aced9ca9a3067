/** The part of a socket (a `net.Socket`, any `Writable`) that {@link TurnCork} uses. */
export interface Corkable {
  cork(): void;
  uncork(): void;
}

/**
 * Makes one socket write out of the frames a provider sends during one turn of the event loop,
 * instead of one write (one system call, one small TCP segment for the broker to read) per frame.
 *
 * Handlers settle in bursts: several deliveries finish together and each sends its publish and its
 * acknowledgement. Called before each write, {@link beforeWrite} corks the socket at the first
 * frame of a turn and uncorks it with `setImmediate`, after the I/O callbacks and promise reactions
 * of that turn: the burst leaves in one `writev`, the same bytes in the same order, before the
 * event loop waits for anything, so no publish, acknowledgement or heart-beat is held past the turn
 * that sent it. Closing the socket (`end()`) flushes what is corked. The Redis provider corks its
 * command connection with one per socket (`corkUntilNextTurn`); the RabbitMQ provider does the same
 * around amqplib's own copy loop (`write-batching.ts`).
 */
export class TurnCork {
  readonly #socket: Corkable;
  #corked = false;
  readonly #uncork = () => {
    this.#corked = false;
    this.#socket.uncork();
  };

  constructor(socket: Corkable) {
    this.#socket = socket;
  }

  /** Call before writing a frame to the socket. */
  beforeWrite(): void {
    if (this.#corked) return;
    this.#corked = true;
    this.#socket.cork();
    setImmediate(this.#uncork);
  }
}
