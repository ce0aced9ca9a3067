/**
 * `pnpm bench runtime [N] [rounds]`: the pipeline of `pnpm bench engine` (split → json_transform →
 * batch(100), N messages) run three ways, alternating `rounds` times (default 2), best run of each:
 *
 * - `baseline`: the same topology hand-written on the bare embedded provider (memory mode);
 * - `engine`: `createEngine` built by hand on the embedded provider, lineage on PGlite (as
 *   `pnpm bench engine` does);
 * - `runtime`: the production path, `composeRuntime` of `@factflow/runtime` from settings
 *   (`provider: embedded`, `embedded_mode: memory`, lineage on PGlite under a temporary data dir):
 *   the provider wrapped by the metering of every handler and publish, the route index, the
 *   execution hooks and the file storage, as `factflow run` and `factflow serve` build them.
 *
 * Prints one JSON line: msgs/s of the three modes (N / time from `create` to the end of the execution),
 * `ratio` (runtime / baseline) and `runtimeVsEngine` (runtime / engine: what the composition and its
 * metering cost on top of the engine), with the CPU ms the process spent on each best run.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { silentLogger } from "@factflow/protocols";
import { composeRuntime, type FactflowMetrics, loadSettings } from "@factflow/runtime";
import { BENCH_PIPELINE, baseline, engineRun } from "./engine.js";

async function runtimeRun(
  n: number,
): Promise<{ msgsPerSec: number; ms: number; cpuMs: number; handled: number }> {
  const dir = mkdtempSync(join(tmpdir(), "factflow-bench-runtime-"));
  const settings = loadSettings({
    env: {},
    cwd: dir,
    overrides: {
      data_dir: join(dir, "data"),
      provider: "embedded",
      embedded_mode: "memory",
      lineage: "database",
    },
  });
  const runtime = await composeRuntime(settings, {
    logger: silentLogger,
    scheduleRetention: false,
    tracing: false,
    cluster: "off",
  });
  try {
    const config = await runtime.parseConfig(BENCH_PIPELINE, join(dir, "bench.yaml"));
    const start = performance.now();
    const cpu = process.cpuUsage();
    const record = await runtime.engine.create({
      config,
      configName: "bench",
      configVersion: null,
      input: { items: Array.from({ length: n }, (_, i) => i) },
    });
    const end = await runtime.engine.waitForEnd(record.id);
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    if (end.status !== "completed")
      throw new Error(`[factflow/bench] runtime run ended ${end.status}: ${end.error ?? ""}`);
    // The metering saw every delivery: its handled counter is the proof that the wrapper ran.
    const handled = await handledCount(runtime.metrics);
    return {
      msgsPerSec: Math.round(n / (ms / 1000)),
      ms: Math.round(ms),
      cpuMs: Math.round((used.user + used.system) / 1000),
      handled,
    };
  } finally {
    await runtime.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Deliveries the metering counted (`factflow_messages_total`, every route and status). */
async function handledCount(metrics: FactflowMetrics): Promise<number> {
  const counted = await metrics.messages.get();
  return counted.values.reduce((sum, v) => sum + v.value, 0);
}

export async function run(args: string[]): Promise<void> {
  const n = Number(args[0] ?? 3000);
  const rounds = Number(args[1] ?? 2);
  if (!Number.isInteger(n) || n < 1)
    throw new Error(`[factflow/bench] N must be a positive integer, got "${args[0]}"`);
  // Warm-up, so no mode pays for JIT and module loading.
  await baseline(Math.min(n, 500));
  await runtimeRun(Math.min(n, 500));
  const bases: Awaited<ReturnType<typeof baseline>>[] = [];
  const engines: Awaited<ReturnType<typeof engineRun>>[] = [];
  const runtimes: Awaited<ReturnType<typeof runtimeRun>>[] = [];
  for (let i = 0; i < rounds; i++) {
    bases.push(await baseline(n));
    engines.push(await engineRun(n));
    runtimes.push(await runtimeRun(n));
  }
  const best = <T extends { msgsPerSec: number }>(runs: T[]) =>
    runs.reduce((a, b) => (b.msgsPerSec > a.msgsPerSec ? b : a));
  const base = best(bases);
  const eng = best(engines);
  const rt = best(runtimes);
  const ratio = (a: number, b: number) => Math.round((a / b) * 1000) / 1000;
  console.log(
    JSON.stringify({
      bench: "runtime",
      n,
      rounds,
      provider: "embedded-memory",
      lineage: "pglite",
      baselineMsgsPerSec: base.msgsPerSec,
      baselineCpuMs: base.cpuMs,
      engineMsgsPerSec: eng.msgsPerSec,
      engineMs: eng.ms,
      engineCpuMs: eng.cpuMs,
      runtimeMsgsPerSec: rt.msgsPerSec,
      runtimeMs: rt.ms,
      runtimeCpuMs: rt.cpuMs,
      meteredHandled: rt.handled,
      ratio: ratio(rt.msgsPerSec, base.msgsPerSec),
      engineRatio: ratio(eng.msgsPerSec, base.msgsPerSec),
      runtimeVsEngine: ratio(rt.msgsPerSec, eng.msgsPerSec),
      loadAverage1m: Math.round(loadavg()[0]! * 100) / 100,
    }),
  );
}
