import type { Socket } from "node:net";
import { TurnCork } from "@factflow/provider-kit";
import { TCPWrapper } from "@stomp/tcp-wrapper";

/** Sockets made by `getSocket`, which runs inside the base constructor (before this class's fields exist). */
const made = new WeakMap<object, Socket>();

/**
 * The STOMP client's TCP transport: `TCPWrapper`, which writes every frame to the socket as it is
 * sent, with the provider kit's {@link TurnCork}, so the frames of one event-loop turn (several
 * handlers finishing together, each sending its SEND and its ACK) leave in one socket write.
 */
export class BatchedTcpWrapper extends TCPWrapper {
  readonly #cork: TurnCork;

  constructor(host: string, port: number) {
    super(host, port);
    this.#cork = new TurnCork(made.get(this) as Socket);
    made.delete(this);
  }

  protected override getSocket(port: number, host: string): Socket {
    const socket = super.getSocket(port, host) as Socket;
    made.set(this, socket);
    return socket;
  }

  override send(data: string | ArrayBuffer): void {
    this.#cork.beforeWrite();
    super.send(data);
  }
}
