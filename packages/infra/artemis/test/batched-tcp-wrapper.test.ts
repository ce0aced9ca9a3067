import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { BatchedTcpWrapper } from "../src/batched-tcp-wrapper.js";

/** A loopback server that keeps what each connection sends. */
async function listen(): Promise<{ server: Server; port: number; received: () => Promise<string> }> {
  let text = "";
  let ended: Promise<unknown> | undefined;
  const server = createServer((socket: Socket) => {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      text += chunk;
    });
    ended = once(socket, "end");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no port");
  const received = async () => {
    await ended;
    return text;
  };
  return { server, port: address.port, received };
}

async function opened(wrapper: BatchedTcpWrapper): Promise<void> {
  await new Promise<void>((resolve) => {
    wrapper.onopen = () => resolve();
  });
}

describe("BatchedTcpWrapper", () => {
  let server: Server | undefined;
  afterEach(() => {
    server?.close();
    server = undefined;
  });

  it("holds the frames of one turn in the socket and sends them together, in order, at the end of the turn", async () => {
    const target = await listen();
    server = target.server;
    const wrapper = new BatchedTcpWrapper("127.0.0.1", target.port);
    await opened(wrapper);
    const socket = (wrapper as unknown as { socket: Socket }).socket;
    wrapper.send("SEND\n\none\u0000");
    wrapper.send("ACK\n\n\u0000");
    wrapper.send(new TextEncoder().encode("SEND\n\ntwo\u0000").buffer as ArrayBuffer);
    // Corked for the rest of the turn: nothing has gone to the kernel yet.
    expect(socket.writableCorked).toBe(1);
    expect(socket.writableLength).toBeGreaterThan(0);
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(socket.writableCorked).toBe(0);
    // The next turn corks again.
    wrapper.send("SEND\n\nthree\u0000");
    expect(socket.writableCorked).toBe(1);
    wrapper.close();
    expect(await target.received()).toBe(
      "SEND\n\none\u0000ACK\n\n\u0000SEND\n\ntwo\u0000SEND\n\nthree\u0000",
    );
  });
});
