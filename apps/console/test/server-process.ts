import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../../..");
const CLI = join(ROOT, "apps/cli/src/bin.ts");
/** The example pipeline: the server serves its directory as the config directory. */
export const EXAMPLE_DIR = join(ROOT, "examples/docs-ingest");

/** A `factflow serve` child process on the embedded provider, as a user starts it. */
export interface ServerProcess {
  readonly base: string;
  log(): string;
  /** Calls the API with the token (when the server has one). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
  call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

export async function startServerProcess(
  options: {
    token?: string;
    env?: Record<string, string>;
    /** A directory to keep the server's data in (and leave behind on stop), e.g. to restart on it. */
    dir?: string;
  } = {},
): Promise<ServerProcess> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "factflow-console-"));
  const child: ChildProcess = spawn(
    process.execPath,
    ["--conditions=factflow-source", "--import", "tsx", CLI, "serve", "--port", "0"],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? dir,
        // The suite's PGlite template (vitest.shared.ts): a copy instead of an initdb per server.
        FACTFLOW_PGLITE_TEMPLATE_DIR: process.env.FACTFLOW_PGLITE_TEMPLATE_DIR ?? "",
        FACTFLOW_DATA_DIR: join(dir, "data"),
        FACTFLOW_CONFIG_DIR: EXAMPLE_DIR,
        FACTFLOW_EMBEDDED_MODE: "memory",
        ...(options.token === undefined ? {} : { FACTFLOW_API_TOKEN: options.token }),
        ...options.env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  // A test that times out before it gets the handle cannot stop the server: the worker does on exit.
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  child.once("exit", () => process.off("exit", killOnExit));
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  child.stdout?.resume();
  const base = await new Promise<string>((resolvePromise, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`server did not start within 90 s:\n${stderr}`));
    }, 90_000);
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
    log: () => stderr,
    async call(method, path, body) {
      const headers: Record<string, string> = {};
      if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const response = await fetch(`${base}/api/v1${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, body: text === "" ? null : JSON.parse(text) };
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        await exited;
      }
      if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}
