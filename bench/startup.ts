/**
 * `pnpm bench startup [items] [template-modes]`: how long the event loop stalls while a process
 * starts on a new data directory, builds the runtime (`composeRuntime`: embedded provider in file
 * mode, lineage in PGlite, as `factflow run` and `factflow serve` build them) and runs a small
 * pipeline (`items` messages, default 200, through the peer bench's 3-hop relay).
 *
 * Each template mode runs in a child process of its own (a cold start), on a new data directory:
 *
 * - `unset`: `FACTFLOW_PGLITE_TEMPLATE_DIR` unset (a library user, `apps/server`, the runtime),
 *   with `XDG_CACHE_HOME` at an empty directory (a first start on a new machine);
 * - `cold`: the variable names an empty directory, so the template is made during this start
 *   (a first run without `factflow prepare`);
 * - `warm`: the variable names a directory whose template was made beforehand;
 * - `idle`: the control: the same timer in a process that only waits 5 s. On a shared machine a
 *   timer is late by however long the process waits for a core; that share is not the start-up's.
 *
 * A 100 ms timer is armed once the modules are loaded; its worst and 99th-percentile lateness over
 * compose → run → close is the figure (goal: ≤ 50 ms throughout). Prints one JSON line per mode.
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const MODES = ["idle", "unset", "cold", "warm"] as const;
type TemplateMode = (typeof MODES)[number];

interface ChildResult {
  timerLateMaxMs: number;
  timerLateP99Ms: number;
  timerFirings: number;
  /** When (ms after the start) each firing later than 50 ms was due, and by how much it was late. */
  lateFirings: [number, number][];
  composeMs: number;
  runMs: number;
  totalMs: number;
}

function summary(
  lateness: number[],
  late: [number, number][],
  times: Pick<ChildResult, "composeMs" | "runMs" | "totalMs">,
): ChildResult {
  const sorted = lateness.sort((a, b) => a - b);
  return {
    timerLateMaxMs: Math.round(sorted[sorted.length - 1] ?? 0),
    timerLateP99Ms: Math.round(sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0),
    timerFirings: sorted.length,
    lateFirings: late,
    ...times,
  };
}

/** The child's side: the measurement itself, in a process of its own. */
async function measureInChild(items: number, idle: boolean): Promise<ChildResult> {
  const { silentLogger } = await import("@factflow/protocols");
  const { composeRuntime, loadSettings } = await import("@factflow/runtime");
  const { relayPipelineYaml } = await import("./_engine-relay.js");
  const dir = await mkdtemp(join(tmpdir(), "factflow-bench-startup-"));
  const lateness: number[] = [];
  const late: [number, number][] = [];
  let due = performance.now() + 100;
  let handle: NodeJS.Timeout;
  const arm = () => {
    handle = setTimeout(() => {
      const now = performance.now();
      lateness.push(Math.max(0, now - due));
      if (now - due > 50) late.push([Math.round(due - started), Math.round(now - due)]);
      due = now + 100;
      arm();
    }, 100);
  };
  const started = performance.now();
  arm();
  try {
    if (idle) {
      await new Promise((resolve) => setTimeout(resolve, 5000));
      return summary(lateness, late, {
        composeMs: 0,
        runMs: 0,
        totalMs: Math.round(performance.now() - started),
      });
    }
    const settings = loadSettings({
      env: {},
      cwd: dir,
      overrides: { data_dir: join(dir, "data"), provider: "embedded", embedded_mode: "file" },
    });
    const runtime = await composeRuntime(settings, {
      logger: silentLogger,
      scheduleRetention: false,
      tracing: false,
      cluster: "off",
    });
    const composed = performance.now();
    try {
      const yaml = relayPipelineYaml({ name: "bench-startup", perHop: 16, maxHandlers: 64, sink: false });
      const config = await runtime.parseConfig(yaml, join(dir, "startup.yaml"));
      const record = await runtime.engine.create({
        config,
        configName: "bench-startup",
        configVersion: null,
        input: { items: Array.from({ length: items }, (_, index) => ({ index })) },
      });
      const end = await runtime.engine.waitForEnd(record.id);
      if (end.status !== "completed")
        throw new Error(`[factflow/bench] startup: the run ended ${end.status}: ${end.error ?? ""}`);
    } finally {
      await runtime.close();
    }
    const ended = performance.now();
    return summary(lateness, late, {
      composeMs: Math.round(composed - started),
      runMs: Math.round(ended - composed),
      totalMs: Math.round(ended - started),
    });
  } finally {
    clearTimeout(handle!);
    await rm(dir, { recursive: true, force: true });
  }
}

function runChild(items: number, env: NodeJS.ProcessEnv, idle = false): Promise<ChildResult> {
  return new Promise((resolve, reject) => {
    const child = fork(fileURLToPath(import.meta.url), [], {
      env: { ...env, FACTFLOW_BENCH_STARTUP_CHILD: idle ? "idle" : String(items) },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    let result: ChildResult | undefined;
    child.on("message", (m) => {
      result = m as ChildResult;
    });
    child.on("error", reject);
    child.on("exit", (code) => {
      if (result !== undefined) resolve(result);
      else reject(new Error(`[factflow/bench] startup: the measuring process exited with code ${code}`));
    });
  });
}

export async function run(args: string[]): Promise<void> {
  const items = Number(args[0] ?? 200);
  if (!Number.isInteger(items) || items < 1)
    throw new Error(`[factflow/bench] startup: items must be a positive integer, got "${args[0]}"`);
  const modes = (args[1]?.split(",") ?? [...MODES]) as TemplateMode[];
  for (const mode of modes)
    if (!MODES.includes(mode))
      throw new Error(`[factflow/bench] startup: unknown template mode "${mode}" (use ${MODES.join(", ")})`);
  const templates = await mkdtemp(join(tmpdir(), "factflow-bench-startup-templates-"));
  try {
    for (const mode of modes) {
      const env: NodeJS.ProcessEnv = { ...process.env };
      if (mode === "unset") {
        delete env.FACTFLOW_PGLITE_TEMPLATE_DIR;
        env.XDG_CACHE_HOME = join(templates, "cache");
      } else
        env.FACTFLOW_PGLITE_TEMPLATE_DIR =
          mode === "cold" ? join(templates, "cold") : join(templates, "warm");
      // `warm`: a first process makes the template, the measured one copies it.
      if (mode === "warm") await runChild(1, env);
      const result = await runChild(items, env, mode === "idle");
      console.log(
        JSON.stringify({
          bench: "startup",
          template: mode,
          items,
          provider: "embedded-file",
          lineage: "pglite",
          ...result,
          goalTimerLateMaxMs: 50,
          loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
        }),
      );
    }
  } finally {
    await rm(templates, { recursive: true, force: true });
  }
}

const childItems = process.env.FACTFLOW_BENCH_STARTUP_CHILD;
if (childItems !== undefined) {
  const result = await measureInChild(Number(childItems), childItems === "idle");
  process.send?.(result, () => process.exit(0));
}
