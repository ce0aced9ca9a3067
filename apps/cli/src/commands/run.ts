import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { formatStallDiagnosis } from "@factflow/engine";
import { ConfigError, type JsonValue } from "@factflow/protocols";
import { preferBaselineWasm } from "../baseline-wasm.js";
import { type CliContext, cliLogger, settingsOf, UsageError } from "../context.js";
import { importModule } from "../module-importer.js";
import { json } from "../output.js";
import { ProgressDisplay, type RouteProgress } from "../progress.js";
import { routeOrder } from "../route-order.js";
import { exitStalled } from "../stall-exit.js";
import { type StallEnd, StallWatchdog } from "../stall-watchdog.js";
import { renderSummary, summarize } from "../summary.js";

/** Parses `--input`: a JSON value, or `@file.json`. */
export async function parseInput(raw: string | undefined, cwd: string): Promise<JsonValue | null> {
  if (raw === undefined) return null;
  const text = raw.startsWith("@") ? await readFile(resolve(cwd, raw.slice(1)), "utf8") : raw;
  try {
    return JSON.parse(text) as JsonValue;
  } catch (error) {
    throw new UsageError(
      `--input is not valid JSON (${(error as Error).message}); e.g. --input '{"roots":["docs"]}' or --input @input.json`,
    );
  }
}

/** Parses `--stall-timeout`: seconds (fractions allowed) above 0. */
export function parseStallTimeout(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const seconds = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(seconds) || seconds <= 0) {
    throw new UsageError(
      `--stall-timeout must be a number of seconds above 0 (got ${JSON.stringify(raw)}), e.g. --stall-timeout 120`,
    );
  }
  return seconds;
}

/** `work`'s value, or the stall when it comes first. */
async function unlessStalled<T>(
  work: Promise<T>,
  stalled: Promise<StallEnd>,
): Promise<{ value: T } | { stall: StallEnd }> {
  return Promise.race([work.then((value) => ({ value })), stalled.then((stall) => ({ stall }))]);
}

/**
 * `factflow run <pipeline.yaml>`: one execution in this process on the provider from settings (the
 * embedded provider under .factflow/ by default), live progress, then a summary. Exit 0 only when
 * the execution completed.
 */
export async function runCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const file = args[0];
  if (file === undefined)
    throw new UsageError(
      "factflow run needs a pipeline file: factflow run examples/docs-ingest/pipeline.yaml",
    );
  const path = resolve(ctx.cwd, file);
  let source: string;
  try {
    source = await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? "error"}); check the path`,
    );
  }
  const input = await parseInput(ctx.flags.input, ctx.cwd);
  const stallTimeout = parseStallTimeout(ctx.flags["stall-timeout"]);
  // The user runs this file on purpose: its own directory may hold its adapter modules.
  const settings = await settingsOf(ctx, { adapterDir: dirname(path) });
  const { output, flags } = ctx;
  // One execution, then exit: no retention schedule (`factflow executions prune` runs it on demand),
  // and PGlite's WebAssembly is not worth optimising (see baseline-wasm.ts).
  const { composeRuntime } = await import("@factflow/runtime");
  preferBaselineWasm();
  const runtime = await composeRuntime(settings, {
    logger: cliLogger(output),
    progressIntervalMs: 250,
    scheduleRetention: false,
    importModule,
    // After stall_after_s without progress (--stall-after): what the run waits for, once per stall.
    onExecutionStalled: (_, diagnosis) => output.err(formatStallDiagnosis(diagnosis)),
  });
  let interrupted = 0;
  let executionId: string | undefined;
  const onSigint = () => {
    interrupted += 1;
    if (interrupted > 1) process.exit(130);
    output.err("interrupted: cancelling the execution (press Ctrl-C again to quit at once)");
    if (executionId !== undefined) void runtime.engine.cancel(executionId).catch(() => undefined);
  };
  process.on("SIGINT", onSigint);
  // Gives the run up after --stall-timeout without progress, or when nothing is left that could
  // make any (the event loop drained): never an exit on an unsettled await.
  const watchdog = new StallWatchdog(
    runtime.engine,
    stallTimeout === undefined ? undefined : stallTimeout * 1000,
  );
  let configName = path;
  const stalled = (end: StallEnd) =>
    exitStalled(ctx, runtime, end, {
      id: executionId,
      config: configName,
      ...(stallTimeout === undefined ? {} : { timeoutSeconds: stallTimeout }),
    });
  try {
    const config = await runtime.parseConfig(source, path);
    configName = config.name;
    watchdog.start();
    const created = await unlessStalled(
      runtime.engine.create({
        config,
        configName: config.name,
        configVersion: config.version ?? null,
        input,
        configPath: path,
      }),
      watchdog.stalled,
    );
    if ("stall" in created) return await stalled(created.stall);
    const record = created.value;
    executionId = record.id;
    if (!flags.json) {
      const where =
        settings.provider === "embedded"
          ? `embedded (${settings.embedded_mode}) provider, data in ${settings.data_dir}`
          : `${settings.provider} provider`;
      output.out(`factflow: running ${config.name} as execution ${record.id} on the ${where}`);
    }
    const display = flags.json ? undefined : new ProgressDisplay(output, routeOrder(config));
    const abort = new AbortController();
    const followed = await unlessStalled(
      (async () => {
        for await (const event of runtime.engine.events(record.id, { afterId: 0, signal: abort.signal })) {
          if (event.type === "route_progress")
            display?.update((event.data as { routes?: Record<string, RouteProgress> }).routes ?? {});
        }
      })(),
      watchdog.stalled,
    );
    display?.finish();
    if ("stall" in followed) {
      abort.abort();
      return await stalled(followed.stall);
    }
    watchdog.stop();
    await runtime.lineage.flush();
    const summary = await summarize(runtime, record.id);
    output.out(flags.json ? json(summary) : `\n${renderSummary(summary)}`);
    return summary.status === "completed" ? 0 : 1;
  } catch (error) {
    if (error instanceof ConfigError) {
      output.err(error.message);
      return 2;
    }
    throw error;
  } finally {
    watchdog.stop();
    process.off("SIGINT", onSigint);
    await runtime.close();
  }
}
