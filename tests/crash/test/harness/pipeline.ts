import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const SINK_MODULE = resolve(import.meta.dirname, "../../fixtures/crash-sink.mjs");

/** The shape every scenario runs: fan-out → slow step → batch (stateful) → sink. */
export const PIPELINE = {
  name: "crash",
  items: 500,
  slow: { delayMs: 20, concurrency: 4, prefetch: 8 },
  batch: { size: 10, prefetch: 10 },
  sink: { concurrency: 1, prefetch: 2 },
} as const;

/**
 * How many items a kill may make the sink see twice: every delivery that can have done its work
 * without its acknowledgement being durable. We cannot observe that at the instant of a SIGKILL, so
 * it is bounded from the config: per route, the deliveries the broker may hand out unsettled
 * (prefetch) plus those whose acknowledgement may still be on its way (one per handler slot,
 * `concurrency`), counted in items (a sink delivery carries a whole batch). The batch route's
 * concurrency and prefetch are at least the batch size (the engine raises them to hold a batch).
 */
export const DUPLICATE_BOUND_PER_KILL =
  PIPELINE.slow.concurrency +
  PIPELINE.slow.prefetch +
  PIPELINE.batch.size +
  PIPELINE.batch.prefetch +
  (PIPELINE.sink.concurrency + PIPELINE.sink.prefetch) * PIPELINE.batch.size;

/** The route queues of the pipeline, as scoped under `/queue/<execution id>/`. */
export const QUEUES = ["split.in", "slow.in", "batch.in", "sink.in"] as const;

/**
 * Writes the pipeline and its sink module into `configDir` (the server's config and adapter
 * directory). The sink appends to `sinkFile`. Returns the pipeline file's path.
 */
export function writePipeline(configDir: string, sinkFile: string): string {
  mkdirSync(configDir, { recursive: true });
  copyFileSync(SINK_MODULE, join(configDir, "crash-sink.mjs"));
  const { items, slow, batch, sink } = PIPELINE;
  const yaml = `# Written by tests/crash: ${items} items fan out, pass a slow step, are batched, and sunk.
name: ${PIPELINE.name}
adapter_modules: [./crash-sink.mjs]
settings:
  retry: { max_attempts: 5, initial_delay_ms: 100, max_delay_ms: 1000 }
init:
  route: split
  message: { items: [${Array.from({ length: items }, (_, i) => i).join(", ")}] }
routes:
  split:
    inbound: { queue: split.in }
    adapters: [{ type: split, config: { field: items, as: item } }]
    outbound: [slow.in]
  slow:
    inbound: { queue: slow.in, concurrency: ${slow.concurrency}, prefetch: ${slow.prefetch} }
    adapters: [{ type: delay, config: { ms: ${slow.delayMs} } }]
    outbound: [batch.in]
  batch:
    inbound: { queue: batch.in, concurrency: ${batch.size}, prefetch: ${batch.prefetch} }
    adapters: [{ type: batch, config: { size: ${batch.size}, timeout_ms: 1000 } }]
    outbound: [sink.in]
  sink:
    inbound: { queue: sink.in, concurrency: ${sink.concurrency}, prefetch: ${sink.prefetch} }
    adapters: [{ type: crash_sink, config: { file: ${JSON.stringify(sinkFile)} } }]
`;
  const file = join(configDir, `${PIPELINE.name}.yaml`);
  writeFileSync(file, yaml);
  return file;
}

/** What the sink file says, counted outside Factflow. */
export interface SinkCount {
  /** Lines written. */
  readonly lines: number;
  /** Expected items never written. */
  readonly lost: number;
  /** Lines beyond the first for an item. */
  readonly duplicates: number;
  /** Lines that are not an expected item (must be 0). */
  readonly unexpected: number;
}

export function sinkLines(sinkFile: string): number {
  if (!existsSync(sinkFile)) return 0;
  const text = readFileSync(sinkFile, "utf8");
  let lines = 0;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines++;
  return lines;
}

export function countSink(sinkFile: string): SinkCount {
  const text = existsSync(sinkFile) ? readFileSync(sinkFile, "utf8") : "";
  const seen = new Map<string, number>();
  let lines = 0;
  for (const line of text.split("\n")) {
    if (line === "") continue;
    lines++;
    seen.set(line, (seen.get(line) ?? 0) + 1);
  }
  let lost = 0;
  for (let i = 0; i < PIPELINE.items; i++) if (!seen.has(String(i))) lost++;
  const expected =
    lines - [...seen.entries()].filter(([id]) => !isExpected(id)).reduce((n, [, c]) => n + c, 0);
  const unexpected = lines - expected;
  const distinct = [...seen.keys()].filter(isExpected).length;
  return { lines, lost, duplicates: expected - distinct, unexpected };
}

function isExpected(id: string): boolean {
  const n = Number(id);
  return /^\d+$/.test(id) && n < PIPELINE.items;
}
