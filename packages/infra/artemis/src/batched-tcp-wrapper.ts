import type { Socket } from "node:net";
import { TCPWrapper } from "@stomp/tcp-wrapper";

/** Sockets made by `getSocket`, which runs inside the base constructor (before this class's fields exist). */
const made = new WeakMap<object, Socket>();

/**
 * The STOMP client's TCP transport, making one socket write out of the frames sent in one turn of
 * the event loop instead of one write (one system call, one TCP segment for the broker to read) per
 * frame.
 *
 * A relay sends its frames in bursts: the handlers of several deliveries finish together and each
 * sends a SEND and an ACK. `TCPWrapper` writes each frame to the socket at once; here the first
 * frame of a turn corks the socket and the end of the turn (`process.nextTick`, after the callbacks
 * and promise reactions queued with it) uncorks it, so the burst goes out as one `writev`: the same
 * bytes in the same order, before the event loop does anything else, so no receipt, ACK or
 * heart-beat waits past the turn that sent it. A close (`end()`) flushes what is corked.
 */
export class BatchedTcpWrapper extends TCPWrapper {
  readonly #socket: Socket;
  #corked = false;
  readonly #uncork = () => {
    this.#corked = false;
    this.#socket.uncork();
  };

  constructor(host: string, port: number) {
    super(host, port);
    this.#socket = made.get(this) as Socket;
    made.delete(this);
  }

  protected override getSocket(port: number, host: string): Socket {
    const socket = super.getSocket(port, host) as Socket;
    made.set(this, socket);
    return socket;
  }

  override send(data: string | ArrayBuffer): void {
    if (!this.#corked) {
      this.#corked = true;
      this.#socket.cork();
      process.nextTick(this.#uncork);
    }
    super.send(data);
  }
}
