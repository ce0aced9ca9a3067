import { Socket } from "node:net";

/** The outcome of a service probe: the suite runs when `ok`, and otherwise reports `reason`. */
export type Availability = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/**
 * Opens and closes one TCP connection to `host:port`. Resolves `{ ok: true }` when the connection is
 * accepted within `timeoutMs`, otherwise `{ ok: false, reason }`; never rejects.
 */
export function probeTcp(host: string, port: number, timeoutMs = 1000): Promise<Availability> {
  return new Promise((resolve) => {
    const socket = new Socket();
    let settled = false;
    const finish = (result: Availability): void => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () =>
      finish({ ok: false, reason: `no answer from ${host}:${port} within ${timeoutMs} ms` }),
    );
    socket.once("error", (error: NodeJS.ErrnoException) =>
      finish({ ok: false, reason: `cannot connect to ${host}:${port}: ${error.code ?? error.message}` }),
    );
    socket.connect(port, host, () => finish({ ok: true }));
  });
}
