import { type AddressInfo, createServer, type Server, Socket } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFaultProxy, type FaultProxy } from "../src/fault-proxy.js";
import { probeTcp } from "../src/probe-tcp.js";
import { sleep, waitFor } from "../src/wait-for.js";

/** A local echo server: the broker stand-in for proxy tests (a real TCP peer, not a mock). */
async function startEcho(): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

/** A client that collects everything it receives. */
async function connect(
  port: number,
): Promise<{ socket: Socket; received: () => string; closed: () => boolean }> {
  const socket = new Socket();
  let data = "";
  let closed = false;
  socket.on("data", (chunk: Buffer) => {
    data += chunk.toString("utf8");
  });
  socket.on("close", () => {
    closed = true;
  });
  socket.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.connect(port, "127.0.0.1", () => resolve());
  });
  return { socket, received: () => data, closed: () => closed };
}

describe("createFaultProxy", () => {
  let echo: Awaited<ReturnType<typeof startEcho>>;
  let proxy: FaultProxy;
  const clients: Socket[] = [];

  beforeEach(async () => {
    echo = await startEcho();
    proxy = await createFaultProxy({ target: { host: "127.0.0.1", port: echo.port } });
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.destroy();
    await proxy.close();
    for (const s of echo.sockets) s.destroy();
    await new Promise<void>((resolve) => echo.server.close(() => resolve()));
  });

  const client = async () => {
    const c = await connect(proxy.port);
    clients.push(c.socket);
    return c;
  };

  it("forwards bytes both ways, in order", async () => {
    expect(proxy.host).toBe("127.0.0.1");
    const c = await client();
    const text = Array.from({ length: 200 }, (_, i) => `line ${i}\n`).join("");
    for (let i = 0; i < text.length; i += 97) c.socket.write(text.slice(i, i + 97));
    await waitFor(() => c.received().length === text.length, { timeoutMs: 5_000 });
    expect(c.received()).toBe(text);
    expect(proxy.liveConnections()).toBe(1);
  });

  it("delay adds latency in each direction and keeps order", async () => {
    const c = await client();
    proxy.delay(150);
    const started = performance.now();
    c.socket.write("a");
    c.socket.write("b");
    await waitFor(() => c.received() === "ab", { timeoutMs: 5_000 });
    expect(performance.now() - started, "two hops of 150 ms").toBeGreaterThanOrEqual(250);
    proxy.delay(0);
    c.socket.write("c");
    await waitFor(() => c.received() === "abc", { timeoutMs: 5_000 });
  });

  it("stall holds traffic with the connection open, resume delivers what was held", async () => {
    const c = await client();
    proxy.stall();
    c.socket.write("held");
    await sleep(200);
    expect(c.received(), "nothing passes while stalled").toBe("");
    expect(c.closed()).toBe(false);
    proxy.resume();
    await waitFor(() => c.received() === "held", { timeoutMs: 5_000 });
  });

  it("cutAll destroys every live connection and still accepts new ones", async () => {
    const a = await client();
    const b = await client();
    await waitFor(() => proxy.liveConnections() === 2, { timeoutMs: 2_000 });
    expect(proxy.cutAll()).toBe(2);
    await waitFor(() => a.closed() && b.closed(), {
      timeoutMs: 2_000,
      description: "both clients to see the cut",
    });
    await waitFor(() => echo.sockets.size === 0, {
      timeoutMs: 2_000,
      description: "the upstream sides to close",
    });
    const c = await client();
    c.socket.write("again");
    await waitFor(() => c.received() === "again", { timeoutMs: 5_000 });
    expect(proxy.acceptedConnections()).toBe(3);
  });

  it("closes the client side when the target is unreachable", async () => {
    const dead = await startEcho();
    const port = dead.port;
    await new Promise<void>((resolve) => dead.server.close(() => resolve()));
    const broken = await createFaultProxy({ target: { host: "127.0.0.1", port } });
    try {
      const c = await connect(broken.port);
      clients.push(c.socket);
      await waitFor(() => c.closed(), { timeoutMs: 5_000, description: "the client to be closed" });
    } finally {
      await broken.close();
    }
  });

  it("close stops listening and is idempotent", async () => {
    const c = await client();
    await proxy.close();
    await proxy.close();
    await waitFor(() => c.closed(), { timeoutMs: 2_000 });
    const probe = await probeTcp("127.0.0.1", proxy.port, 500);
    expect(probe.ok).toBe(false);
  });
});
