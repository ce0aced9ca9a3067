import { type ChildProcess, spawn } from "node:child_process";

/** A fixture running in a process of its own; see {@link spawnFixture}. */
export interface FixtureProcess {
  readonly proc: ChildProcess;
  /** What the process has written to stderr so far. */
  readonly stderr: string;
  /** Resolves with the signal that ended the process, or null when it exited by itself. */
  readonly exited: Promise<NodeJS.Signals | null>;
  /** Resolves once stdout is closed: every line the process wrote has reached `onLine`. */
  readonly drained: Promise<void>;
}

/**
 * Runs the TypeScript file `fixture` with `args` in a Node process of its own (workspace sources
 * through the `factflow-source` condition and tsx), calling `onLine` with each whole line it
 * writes to stdout. Crash tests use it to kill a consumer or a broker with SIGKILL and check what a
 * survivor sees; the fixture reports what it did (`READY`, an id per message) one line at a time.
 */
export function spawnFixture(
  fixture: string,
  args: readonly string[],
  options: { readonly cwd: string; readonly onLine: (line: string) => void },
): FixtureProcess {
  const proc = spawn(
    process.execPath,
    ["--conditions=factflow-source", "--import", "tsx", fixture, ...args],
    { cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  let rest = "";
  proc.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  proc.stdout?.on("data", (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) options.onLine(line);
  });
  const drained = new Promise<void>((resolve) => proc.stdout?.on("close", () => resolve()));
  const exited = new Promise<NodeJS.Signals | null>((resolve) =>
    proc.on("exit", (_code, signal) => resolve(signal)),
  );
  return {
    proc,
    get stderr() {
      return stderr;
    },
    exited,
    drained,
  };
}
