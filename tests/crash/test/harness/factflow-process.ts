import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../../../..");
const CLI = resolve(ROOT, "apps/cli/src/bin.ts");

/** How long a process may take to start listening (tsx compiles the server from source). */
const START_DEADLINE_MS = 120_000;

/** A `factflow` child process started the way a user starts it, from source. */
export class FactflowProcess {
  readonly child: ChildProcess;
  #stdout = "";
  #stderr = "";
  readonly exited: Promise<number | null>;

  constructor(args: readonly string[], env: Record<string, string>) {
    this.child = spawn(process.execPath, ["--conditions=factflow-source", "--import", "tsx", CLI, ...args], {
      cwd: ROOT,
      // Only what the scenario sets: a developer's own FACTFLOW_* must not change the scenario.
      // The suite's PGlite template (vitest.shared.ts) is passed on: a copy instead of an initdb.
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "/tmp",
        FACTFLOW_PGLITE_TEMPLATE_DIR: process.env.FACTFLOW_PGLITE_TEMPLATE_DIR ?? "",
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout?.on("data", (chunk: Buffer) => {
      this.#stdout += chunk.toString("utf8");
    });
    this.child.stderr?.on("data", (chunk: Buffer) => {
      this.#stderr += chunk.toString("utf8");
    });
    this.exited = new Promise((done) => this.child.once("exit", (code) => done(code)));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  stdout(): string {
    return this.#stdout;
  }

  stderr(): string {
    return this.#stderr;
  }

  /**
   * The last `lines` lines of stdout and stderr, for a failure message. The engine's info line for
   * every duplicate it skipped is left out: after a crash there are hundreds of them.
   */
  tail(lines = 40): string {
    const cut = (text: string) =>
      text
        .trimEnd()
        .split("\n")
        .filter((line) => !line.includes("duplicate delivery acknowledged"))
        .slice(-lines)
        .join("\n");
    return `--- stdout (last ${lines} lines)\n${cut(this.#stdout)}\n--- stderr (last ${lines} lines)\n${cut(this.#stderr)}`;
  }

  /** Resolves with the first match of `pattern` in stdout or stderr; rejects if the process exits first. */
  async waitFor(pattern: RegExp, what: string, deadlineMs = START_DEADLINE_MS): Promise<RegExpExecArray> {
    const started = Date.now();
    for (;;) {
      const match = pattern.exec(this.#stdout) ?? pattern.exec(this.#stderr);
      if (match !== null) return match;
      if (!this.running)
        throw new Error(`factflow exited (${this.child.exitCode}) before ${what}\n${this.tail()}`);
      if (Date.now() - started > deadlineMs) {
        throw new Error(`factflow did not get to ${what} within ${deadlineMs} ms\n${this.tail()}`);
      }
      await sleep(25);
    }
  }

  /** `kill -9`: no shutdown code runs, exactly like a crash. */
  async kill9(): Promise<void> {
    if (this.running) this.child.kill("SIGKILL");
    await this.exited;
  }

  /** A graceful stop (SIGTERM), escalating to SIGKILL if it takes more than `graceMs`. */
  async stop(graceMs = 30_000): Promise<void> {
    if (!this.running) return;
    this.child.kill("SIGTERM");
    const timer = setTimeout(() => this.child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** `factflow serve --port 0`, listening. */
export async function startServer(
  env: Record<string, string>,
): Promise<{ server: FactflowProcess; base: string }> {
  const server = new FactflowProcess(["serve", "--port", "0"], env);
  try {
    const match = await server.waitFor(/server listening on (http:\/\/\S+)/, "listening");
    return { server, base: match[1] as string };
  } catch (error) {
    await server.kill9();
    throw error;
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}
