import { formatStallDiagnosis, type StallDiagnosis } from "@factflow/engine";
import { type FactflowRuntime, stallJson } from "@factflow/runtime";
import type { CliContext } from "./context.js";
import { STALLED_EXIT_CODE } from "./drain-guard.js";
import { json } from "./output.js";
import type { StallEnd } from "./stall-watchdog.js";

/** Longest the failed execution's end may take before the command exits anyway. */
const END_TIMEOUT_MS = 15_000;

/** Resolves with `work`'s value, or undefined once `ms` have passed (a ref'd timer: the process waits). */
async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work.catch(() => undefined),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function headline(end: StallEnd, id: string | undefined, timeoutSeconds: number | undefined): string {
  const execution = id === undefined ? "the execution" : `execution ${id}`;
  if (end.reason === "timeout") {
    return `factflow: ${execution} made no progress for ${seconds(end.quietMs)} (--stall-timeout ${timeoutSeconds}); giving up`;
  }
  return `factflow: ${execution} cannot finish: nothing in this process is left to make progress (no handler, timer or connection is active) although it has not ended; something waits on a promise nobody will settle (an adapter, the provider, or factflow itself)`;
}

/** The error the execution's row keeps: why it was given up, and the first things it waited for. */
function rowError(end: StallEnd, diagnosis: StallDiagnosis | undefined, timeoutSeconds?: number): string {
  const why =
    end.reason === "timeout"
      ? `stalled: no progress for ${seconds(end.quietMs)} (factflow run --stall-timeout ${timeoutSeconds})`
      : "stalled: nothing left in the process could make progress";
  const waits = diagnosis?.waitingFor ?? [];
  return waits.length === 0
    ? why
    : `${why}; waiting for: ${waits.slice(0, 3).join("; ")}${waits.length > 3 ? "; …" : ""}`;
}

/**
 * Gives up a stalled run: prints what the execution waits for (text on stderr, or one JSON object
 * on stdout with `--json`), marks the execution failed, and returns {@link STALLED_EXIT_CODE}.
 */
export async function exitStalled(
  ctx: CliContext,
  runtime: FactflowRuntime,
  end: StallEnd,
  known: { readonly id: string | undefined; readonly config: string; readonly timeoutSeconds?: number },
): Promise<number> {
  const id = known.id ?? runtime.engine.progress()[0]?.executionId;
  const diagnosis = id === undefined ? undefined : await runtime.engine.diagnose(id);
  const error = rowError(end, diagnosis, known.timeoutSeconds);
  if (ctx.flags.json) {
    ctx.output.out(
      json({
        id: id ?? null,
        config: known.config,
        status: "stalled",
        reason: end.reason,
        error,
        stall: diagnosis === undefined ? null : stallJson(diagnosis),
      }),
    );
  } else {
    ctx.output.err(headline(end, id, known.timeoutSeconds));
    if (diagnosis !== undefined) ctx.output.err(formatStallDiagnosis(diagnosis));
  }
  if (id !== undefined) {
    const failed = await within(runtime.engine.fail(id, error), END_TIMEOUT_MS);
    if (!ctx.flags.json) {
      ctx.output.err(
        failed === undefined
          ? `factflow: could not mark execution ${id} failed within ${END_TIMEOUT_MS / 1000} s; it stays running (factflow executions cancel ${id})`
          : `factflow: execution ${id} is marked failed (factflow executions show ${id}, factflow lineage ${id})`,
      );
    }
  }
  return STALLED_EXIT_CODE;
}
