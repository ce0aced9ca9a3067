import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../../../..");
const CLI = join(ROOT, "apps/cli/src/bin.ts");

/** A `factflow serve` child process, as a user starts it. */
export interface ServerProcess {
  readonly base: string;
  readonly port: number;
  readonly dir: string;
  /** Everything the process wrote to stderr so far. */
  log(): string;
  stop(): Promise<void>;
}

/** The exit of a server process that refused to start. */
export interface RefusedStart {
  readonly code: number | null;
  readonly stderr: string;
}

/**
 * Every child still running. A test that times out while its server starts never gets the handle to
 * stop it, so the worker kills what is left when it exits (a leaked server outlived a CI run once).
 */
const children = new Set<ChildProcess>();
process.once("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

function spawnServe(
  env: Record<string, string>,
  args: readonly string[],
): { child: ChildProcess; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "factflow-security-"));
  const child = spawn(
    process.execPath,
    ["--conditions=factflow-source", "--import", "tsx", CLI, "serve", "--port", "0", ...args],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? dir,
        FACTFLOW_DATA_DIR: join(dir, "data"),
        FACTFLOW_EMBEDDED_MODE: "memory",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  children.add(child);
  child.once("exit", () => children.delete(child));
  return { child, dir };
}

/** Starts `factflow serve --port 0` with `env` and resolves once it listens. */
export async function startServerProcess(
  env: Record<string, string> = {},
  args: readonly string[] = [],
): Promise<ServerProcess> {
  const { child, dir } = spawnServe(env, args);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  child.stdout?.resume();
  const base = await new Promise<string>((resolvePromise, reject) => {
    // A deadline for a hang (a loaded machine can take tens of seconds), and the child goes with it.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start within 100 s:\n${stderr}`));
    }, 100_000);
    const onData = () => {
      const match = /listening on (http:\/\/\S+)/.exec(stderr);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        child.stderr?.off("data", onData);
        resolvePromise(match[1]);
      }
    };
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${stderr}`));
    });
  });
  return {
    base,
    port: Number(new URL(base).port),
    dir,
    log: () => stderr,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Runs `factflow serve` expecting it to refuse to start; resolves with its exit code and stderr. */
export async function expectRefusedStart(
  env: Record<string, string>,
  args: readonly string[] = [],
): Promise<RefusedStart> {
  const { child, dir } = spawnServe(env, args);
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  child.stdout?.resume();
  try {
    return await new Promise<RefusedStart>((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`server started instead of refusing:\n${stderr}`));
      }, 60_000);
      child.stderr?.on("data", () => {
        if (/listening on/.test(stderr)) {
          clearTimeout(timer);
          child.kill("SIGTERM");
          reject(new Error(`server started instead of refusing:\n${stderr}`));
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        resolvePromise({ code, stderr });
      });
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One raw HTTP exchange (fetch refuses to set Host, so raw requests go through node:http). */
export interface RawResponse {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
  readonly body: any;
  readonly text: string;
}

/** Sends a request with full control over its headers, including `Host`. */
export async function send(
  base: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<RawResponse> {
  const { request } = await import("node:http");
  const url = new URL(base);
  return new Promise((resolvePromise, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          ...(options.body === undefined
            ? {}
            : { "content-length": String(Buffer.byteLength(options.body)) }),
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {}
          resolvePromise({ status: res.statusCode ?? 0, body, text });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    // A server that answers before reading a large body (413) closes while the body is still being
    // written; the write's EPIPE can come after the request let go of its socket, where nothing else
    // listens (vitest then fails the run on an unhandled error).
    req.on("socket", (socket) => socket.on("error", () => {}));
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}
