import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));
const bin = fileURLToPath(new URL("../../../../apps/cli/src/bin.ts", import.meta.url));

/** How `factflow` is started from the sources, as `pnpm factflow` does. */
export const factflowCommand = [
  process.execPath,
  "--conditions=factflow-source",
  "--import",
  "tsx",
  bin,
] as const;

export interface Exited {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `factflow <args>` to its end (killed after `killAfterMs`, which a test reports as a hang). */
export function runFactflow(
  args: readonly string[],
  env: Record<string, string>,
  killAfterMs = 240_000,
): Promise<Exited> {
  const [node, ...rest] = factflowCommand;
  const child = spawn(node, [...rest, ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** One route of `factflow run --json`'s summary. */
export interface RouteSummary {
  readonly route: string;
  readonly messages: number;
  readonly completed: number;
  readonly failed: number;
  readonly retries: number;
  readonly dead_letters: number;
}

export interface RunSummary {
  readonly id: string;
  readonly status: string;
  readonly routes: readonly RouteSummary[];
  readonly dead_letters: number;
}
