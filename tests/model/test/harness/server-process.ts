import { type ChildProcess, spawn } from "node:child_process";
import { factflowCommand, repoRoot } from "./cli-process.js";

/** A `factflow serve --port 0` child process, listening, that a test may kill -9 and start again. */
export interface ServerProcess {
  readonly base: string;
  readonly child: ChildProcess;
  output(): string;
  kill9(): Promise<void>;
  stop(): Promise<void>;
}

export async function startServer(env: Record<string, string>): Promise<ServerProcess> {
  const [node, ...rest] = factflowCommand;
  const child = spawn(node, [...rest, "serve", "--port", "0"], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const base = await new Promise<string>((resolve, reject) => {
    const look = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /server listening on (http:\/\/\S+)/.exec(output);
      if (match !== null) resolve(match[1] as string);
    };
    child.stdout.on("data", look);
    child.stderr.on("data", look);
    void exited.then(() =>
      reject(new Error(`factflow serve exited before listening:\n${output.slice(-3000)}`)),
    );
  });
  const end = async (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return { base, child, output: () => output, kill9: () => end("SIGKILL"), stop: () => end("SIGTERM") };
}

/** A JSON call; throws with the answer on a non-2xx status. */
export async function api<T>(base: string, method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${base}${path}`, {
    method,
    signal: AbortSignal.timeout(30_000),
    ...(body === undefined
      ? {}
      : { headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}
